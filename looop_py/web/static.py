"""The page's one script and its icon, served from this server (the CSP allows nothing else).

The script does three things and nothing more: it shows times in the browser's
own time zone (UTC on hover); it listens on /live and, when the server says the
work dir changed, fetches the page again and swaps its <main> in place (not
while someone types in a form on it: then after they leave it); and it shows
whether it is live, reconnecting, or logged out. Without script every page
still works, only by reloading.
"""

from __future__ import annotations

SCRIPT = r"""(function () {
  "use strict";
  function times(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      t.textContent = d.toLocaleString([], {year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit"});
      t.title = d.toISOString().replace(/\.\d{3}Z$/, "Z") + " UTC";
    });
  }
  times(document);
  var badge = document.getElementById("live");
  if (!badge || !window.EventSource || !window.fetch) return;
  var busy = false, again = false;
  function typing() {
    var main = document.querySelector("main");
    var a = document.activeElement;
    if (a && a !== document.body && main.contains(a) && a.form) return true;
    var fields = main.querySelectorAll("input[type=text],input:not([type]),textarea");
    return Array.prototype.some.call(fields, function (el) {
      return el.value !== el.defaultValue;
    });
  }
  function wanted(keys) {
    var watch = (document.querySelector("main").dataset.watch || "").split(" ");
    return keys.some(function (k) {
      return (k.indexOf("log:") !== 0) || watch.indexOf(k) >= 0;
    });
  }
  function refresh() {
    if (busy) { again = true; return; }
    if (typing()) { again = true; document.body.dataset.deferred = String(Date.now()); return; }
    busy = true;
    fetch(location.href, {headers: {"Accept": "text/html"}, credentials: "same-origin"})
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("main");
        if (!fresh) return;
        var open = Array.prototype.map.call(document.querySelectorAll("main details[id][open]"),
          function (d) { return d.id; });
        document.querySelector("main").replaceWith(fresh);
        open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
        times(fresh);
        document.body.dataset.updated = String(Date.now());
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; setTimeout(refresh, 150); }
      });
  }
  function connect() {
    var es = new EventSource("/live");
    es.onopen = function () { badge.textContent = "● live"; badge.className = "live-on"; };
    es.onerror = function () {
      badge.textContent = "○ reconnecting…"; badge.className = "live-off";
      if (es.readyState !== 2) return;  // the browser retries by itself
      fetch(location.href, {method: "HEAD", credentials: "same-origin"}).then(function (r) {
        if (r.status === 401) { badge.textContent = "○ logged out: reload to log in"; return; }
        setTimeout(connect, 3000);
      }, function () { setTimeout(connect, 3000); });
    };
    es.addEventListener("change", function (ev) {
      if (wanted(String(ev.data).split(" "))) refresh();
    });
  }
  document.addEventListener("focusout", function () {
    if (again) { again = false; setTimeout(refresh, 300); }
  });
  connect();
})();
"""

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#1d232a"/>'
    '<circle cx="12" cy="16" r="6" fill="none" stroke="#6cb6ff" stroke-width="3"/>'
    '<circle cx="21" cy="16" r="6" fill="none" stroke="#7ee2a8" stroke-width="3"/></svg>'
)
