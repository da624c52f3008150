"""A real headless Chromium on every view: screenshots, live updates from other processes,
answering, approving through the confirm step, a phone's width, and remote use by IP.

Needs Debian's `chromium` and `chromium-driver` (.ci/run installs them); skipped
locally without them, required under CI=true. Screenshots go to
$LOOOP_TEST_OUTPUT (default: test-output/ at the repo root) and their names are
printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, run_looop, wait_for, write_sensor
from tests.web.conftest import Served

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)
OUT = Path(os.environ.get("LOOOP_TEST_OUTPUT") or Path(__file__).parents[2] / "test-output")


def _browser_bins() -> tuple[str, str] | None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/lib/chromium/chromedriver"
        if Path("/usr/lib/chromium/chromedriver").exists()
        else None
    )
    return (chrome, driver) if chrome and driver else None


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager never downloads a driver
    bins = _browser_bins()
    if bins is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI=true needs Debian's chromium and chromium-driver (.ci/run installs them)"
            )
        pytest.skip("no chromium/chromedriver here (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = bins[0]
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        options.add_argument(flag)
    drv = webdriver.Chrome(service=Service(executable_path=bins[1]), options=options)
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()


def held(wd: Paths, move: dict[str, Any]) -> mailbox.Ask:
    """A move the gate held back, as the pulse would hold it."""
    from looop_py.moves import gate, union

    admission = gate.admit(open_wd(wd), union.parse(move), time.time())
    assert admission.held is not None
    return mailbox.get_ask(open_wd(wd), admission.held)


@pytest.fixture
def server(served: Served) -> str:
    return served.url


def _shot(drv: Any, name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    assert drv.save_screenshot(str(path)), name
    print(f"screenshot: {path}")
    return path


def _click(drv: Any, element_id: str) -> None:
    """Click the element with that id; the live feed may swap the page in between finding
    it and clicking it (a stale element), so find it again until the click lands."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + 10
    while True:
        try:
            drv.find_element(By.ID, element_id).click()
            return
        except StaleElementReferenceException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # the swap is under way: a DOM write, milliseconds


@pytest.fixture
def marker(wd: Paths, tmp_path: Path) -> Iterator[Path]:
    """A work dir with every kind of record (_world); the file an approved move writes.
    Its worker loops for a minute: it is killed when the test ends, not left to run."""
    approved = tmp_path / "approved.txt"
    _world(wd, approved)
    yield approved
    killed = run_looop("-C", str(wd.root), "worker", "kill", "builder")
    assert killed.returncode == 0, killed.stderr


def _world(wd: Paths, marker: Path) -> None:
    write_sensor(wd, "disk", 'echo "{\\"signal\\": \\"ok\\"}"')
    write_sensor(wd, "flaky", "echo broken >&2; exit 3")
    beat(open_wd(wd))
    beat(open_wd(wd))
    held(wd, {"action": "run_shell", "cmd": f"echo approved-by-click >> {marker}"})
    mailbox.open_ask(
        open_wd(wd),
        prompt="Which database should the migration use?",
        asker="human",
        now=time.time(),
    )
    script = 'for i in $(seq 1 300); do echo "step $i"; sleep 0.2; done\n'
    r = run_looop("-C", str(wd.root), "worker", "start", "builder", "-", input=script)
    assert r.returncode == 0, r.stderr
    beat(open_wd(wd), force=True)


def _overflow(drv: Any) -> int:
    """How far the page is wider than the window (0: nothing scrolls sideways)."""
    return int(
        drv.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


def _live(drv: Any) -> None:
    from selenium.webdriver.common.by import By

    wait_for(
        lambda: "live" in drv.find_element(By.ID, "live").get_attribute("class").split("-"),
        10,
        "the live badge",
    )
    wait_for(lambda: drv.find_element(By.ID, "live").text == "● live", 10, "live")


def test_every_view_in_a_real_browser_live_then_answer_and_approve_with_a_confirm(
    wd: Paths, driver: Any, server: str, marker: Path
) -> None:
    from selenium.webdriver.common.by import By

    for i in range(3):
        (wd.goals / f"goal-{i}.md").write_text(f"---\npriority: {i}\n---\n# Ship part {i}\n")
    base = server.split("/?", maxsplit=1)[0]
    driver.get(server)  # the one-time code: a session cookie, the code leaves the address bar
    assert "code=" not in driver.current_url and "token" not in driver.current_url
    assert driver.find_elements(By.CSS_SELECTOR, "#timeline svg rect")
    assert (
        driver.find_element(By.CSS_SELECTOR, "#pending").location["y"]
        < (driver.find_element(By.ID, "timeline").location["y"])
    )  # what waits for a human comes first
    stamp = driver.find_element(By.CSS_SELECTOR, "main time")
    assert stamp.get_attribute("title").endswith("Z UTC")
    _live(driver)
    _shot(driver, "01-overview.png")

    # Live: a pulse in another process shows up without a reload.
    before = len(driver.find_elements(By.CSS_SELECTOR, "a[href^='/beats/']"))
    driver.execute_script("window.notReloaded = true")
    r = run_looop("-C", str(wd.root), "pulse", "--force")
    assert r.returncode == 0, r.stderr
    pulsed = time.monotonic()
    wait_for(
        lambda: len(driver.find_elements(By.CSS_SELECTOR, "a[href^='/beats/']")) > before,
        10,
        "the new beat on the open overview",
    )
    shown_after = time.monotonic() - pulsed
    print(f"pulse in another process → on the open page: {shown_after:.2f} s")
    assert driver.execute_script("return window.notReloaded") is True  # swapped in place
    assert shown_after < 3  # within a second of the server seeing it, plus the page's fetch

    for path, name, needle in (
        ("/beats", "02-beats.png", "decided"),
        ("/asks", "03-asks.png", "echo approved-by-click"),
        ("/workers", "04-workers.png", "builder"),
        ("/goals", "05-goals.png", "Ship part 1"),
        ("/goals/goal-1", "06-goal.png", "priority"),
        ("/sensors", "07-sensors.png", "flaky"),
        ("/sensors/flaky", "08-sensor.png", "failing"),
        ("/loops", "09-loops.png", "Rounds"),
        ("/journal?q=sensor", "10-journal.png", "lines holding"),
    ):
        driver.get(f"{base}{path}")
        assert needle in driver.find_element(By.TAG_NAME, "main").text, path
        _shot(driver, name)
    driver.get(f"{base}/beats")
    driver.find_element(By.CSS_SELECTOR, "a[href^='/beats/']").click()
    assert "What changed" in driver.page_source
    _shot(driver, "11-beat.png")
    driver.get(f"{base}/workers/builder")
    log = "return document.getElementById('log').textContent"  # the element is swapped live
    wait_for(lambda: "step" in driver.execute_script(log), 15, "its log")
    first = driver.execute_script(log)
    wait_for(lambda: driver.execute_script(log) != first, 15, "its log growing, live")
    _shot(driver, "12-worker.png")

    # A new ask from another process appears on the open asks page.
    driver.get(f"{base}/asks")
    _live(driver)
    asked = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "ask", "--prompt", "Ship it?"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: "Ship it?" in driver.page_source, 10, "the new ask, live")
    finally:
        asked.terminate()
        asked.wait(timeout=10)

    # Answer the question by clicking; a change while typing does not wipe the text.
    driver.find_element(By.ID, "answer-text-human-1").send_keys("use staging")
    assert run_looop("-C", str(wd.root), "pulse", "--force").returncode == 0
    wait_for(lambda: driver.execute_script("return document.body.dataset.deferred"), 10, "a defer")
    assert driver.find_element(By.ID, "answer-text-human-1").get_attribute("value") == "use staging"
    _click(driver, "answer-human-1")
    wait_for((wd.answers / "human-1.json").exists, 10, "the answer on disk")
    assert jsonio.read_json(wd.answers / "human-1.json")["answer"] == "use staging"
    wait_for(lambda: "from the page" in driver.page_source, 10, "the answer's page")

    # Approve: the first click only shows what will run; cancel runs nothing.
    driver.get(f"{base}/asks")
    _click(driver, "approve-decider-1")
    assert "/asks/decider-1/confirm" in driver.current_url
    assert "echo approved-by-click" in driver.find_element(By.CSS_SELECTOR, ".would-run").text
    button = driver.find_element(By.ID, "confirm")
    assert "run_shell" in button.text and button.size["height"] >= 44
    _shot(driver, "13-confirm.png")
    _click(driver, "cancel")  # a link back: a GET, it cannot run anything
    assert driver.current_url == f"{base}/asks" and not marker.exists()
    driver.get(f"{base}/asks/decider-1/confirm")
    _click(driver, "confirm")
    wait_for(marker.exists, 15, "the approved move's effect on disk")
    assert marker.read_text() == "approved-by-click\n"
    wait_for(lambda: "ran: exit 0" in driver.page_source, 10, "the result on the ask's page")
    assert "/asks/decider-1" in driver.current_url and "the page" in driver.page_source
    answered = jsonio.read_json(wd.answers / "decider-1.json")
    assert answered["verdict"] == "approved" and answered["by"] == "page"
    _shot(driver, "14-ask-answered.png")

    # A phone: pending asks first, nothing wider than the screen, on every view.
    mailbox.open_ask(open_wd(wd), prompt="A long " + "word" * 60, asker="human", now=time.time())
    driver.set_window_size(390, 844)
    width = driver.execute_script("return window.innerWidth")
    assert width <= 390
    for path in ("/", "/asks", "/beats", "/workers", "/goals", "/sensors", "/loops", "/journal"):
        driver.get(f"{base}{path}")
        assert _overflow(driver) == 0, path
    driver.get(f"{base}/")
    assert driver.find_element(By.ID, "pending").location["y"] < 300
    _shot(driver, "15-phone-overview.png")
    driver.get(f"{base}/asks")
    _shot(driver, "16-phone-asks.png")

    # Log out: the session ends; the page asks for a login, the old cookie opens nothing.
    _click(driver, "logout")
    wait_for(lambda: driver.current_url == f"{base}/login", 10, "the login page")
    assert driver.find_element(By.ID, "token")
    driver.get(f"{base}/asks")
    assert driver.find_element(By.TAG_NAME, "h1").text == "401"
    assert "Ship it?" not in driver.page_source


def test_a_wildcard_bind_is_reachable_by_its_ip_and_refuses_other_hosts(
    wd: Paths, driver: Any
) -> None:
    from selenium.webdriver.common.by import By

    from looop_py.web import security
    from tests.web import conftest

    ips = [n for n in security.answers_to("0.0.0.0") if n[0].isdigit() and n != "127.0.0.1"]
    if not ips:
        pytest.skip("this machine has no address but loopback")
    proc, served = conftest.start(wd, "--host", "0.0.0.0", "--allow-remote")
    try:
        assert f"http://{ips[0]}:{served.port}/?code=" in served.url  # printed: an address
        driver.get(served.url)
        assert driver.find_element(By.TAG_NAME, "h1").text == "overview"
        assert "code=" not in driver.current_url
        driver.get(f"http://127.0.0.1:{served.port}/login")
        assert driver.find_element(By.ID, "token")  # loopback answers too
        _shot(driver, "17-remote-by-ip.png")
        import urllib.error
        import urllib.request

        req = urllib.request.Request(
            f"http://{ips[0]}:{served.port}/",
            headers={
                "Host": f"evil.example:{served.port}",
                "Authorization": f"Bearer {served.token}",
            },
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 403
    finally:
        conftest.stop(proc)


def test_report_html_draws_its_charts_in_a_real_browser(
    wd: Paths, tmp_path: Path, driver: Any
) -> None:
    from selenium.webdriver.common.by import By

    write_sensor(wd, "s", "echo 1")
    for _ in range(3):
        beat(open_wd(wd), force=True)
    out = tmp_path / "report.html"
    assert run_looop("-C", str(wd.root), "report", "--html", str(out)).returncode == 0
    driver.get(out.as_uri())
    bars = driver.find_elements(By.CSS_SELECTOR, "#timeline svg rect.bar-decided")
    assert bars and bars[0].size["height"] > 0
    _shot(driver, "18-report.png")


def test_a_real_post_without_the_token_or_from_another_origin_changes_nothing(
    wd: Paths, tmp_path: Path, server: str
) -> None:
    import urllib.error
    import urllib.request

    from looop_py.web import security

    marker = tmp_path / "never.txt"
    ask = held(wd, {"action": "run_shell", "cmd": f"touch {marker}"})
    base = server.split("/?", maxsplit=1)[0]
    token = security.token_path(wd, int(base.rsplit(":", 1)[1])).read_text().strip()
    body = f"csrf={security.csrf_for(token)}".encode()

    def post(headers: dict[str, str], data: bytes = body) -> int:
        req = urllib.request.Request(
            f"{base}/asks/{ask.id}/approve", data=data, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    cookie = {"Authorization": f"Bearer {token}"}
    assert post({}) == 401
    assert post({**cookie, "Origin": "http://evil.example"}) == 403
    assert post({**cookie, "Origin": base}, data=b"csrf=forged") == 403
    assert post({**cookie, "Origin": base}, data=b"") == 403
    assert not marker.exists() and mailbox.get_answer(open_wd(wd), ask.id) is None
    assert post({**cookie, "Origin": base}) == 200  # the same POST done right does run
    assert marker.exists()
