"""A real headless Chromium on every page: screenshots, answering an ask and approving by clicking.

Needs Debian's `chromium` and `chromium-driver` (.ci/run installs them); skipped
locally without them, required under CI=true. Screenshots go to
$LOOOP_TEST_OUTPUT (default: test-output/ at the repo root) and their names are
printed.
"""

from __future__ import annotations

import os
import shutil
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


def test_every_page_in_a_real_browser_then_answer_and_approve_by_clicking(
    wd: Paths, tmp_path: Path, driver: Any, server: str
) -> None:
    from selenium.webdriver.common.by import By

    marker = tmp_path / "approved.txt"
    _world(wd, marker)
    base = server.split("/?", maxsplit=1)[0]
    driver.get(server)  # the token URL: the cookie is set, the token leaves the address bar
    assert "token=" not in driver.current_url
    assert driver.find_elements(By.CSS_SELECTOR, "#timeline svg rect")
    _shot(driver, "01-overview.png")
    link = driver.find_element(By.CSS_SELECTOR, "a[href^='/beats/']")
    link.click()
    assert "What changed" in driver.page_source
    _shot(driver, "02-beat.png")
    driver.get(f"{base}/asks")
    assert "echo approved-by-click" in driver.find_element(By.CSS_SELECTOR, ".would-run").text
    _shot(driver, "03-asks.png")
    driver.get(f"{base}/workers")
    _shot(driver, "04-workers.png")
    driver.get(f"{base}/workers/builder")

    def log_shows_output() -> bool:
        if "step" in driver.find_element(By.ID, "log").text:
            return True
        driver.refresh()
        return False

    wait_for(log_shows_output, 15, "the worker's output on its page")
    _shot(driver, "05-worker.png")
    driver.get(f"{base}/loops")
    _shot(driver, "06-loops.png")
    driver.get(f"{base}/journal?q=sensor")
    _shot(driver, "07-journal.png")

    # Answer the question and approve the held move, by clicking.
    driver.get(f"{base}/asks")
    driver.find_element(By.ID, "answer-text-human-1").send_keys("use staging")
    driver.find_element(By.ID, "answer-human-1").click()
    wait_for((wd.answers / "human-1.json").exists, 10, "the answer on disk")
    assert jsonio.read_json(wd.answers / "human-1.json")["answer"] == "use staging"
    driver.find_element(By.ID, "approve-decider-1").click()
    wait_for(marker.exists, 15, "the approved move's effect on disk")
    assert marker.read_text() == "approved-by-click\n"
    # The verdict is recorded first, the move runs, then what happened is added to it.
    noted = lambda: str(jsonio.read_json(wd.answers / "decider-1.json").get("note")).startswith(  # noqa: E731
        "ran"
    )
    wait_for(noted, 10, "the approval's note")
    answered = jsonio.read_json(wd.answers / "decider-1.json")
    assert answered["verdict"] == "approved" and answered["note"].startswith("ran")
    wait_for(lambda: "no pending asks" in driver.page_source, 10, "the asks page, emptied")
    _shot(driver, "08-asks-answered.png")


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
    _shot(driver, "09-report.png")


def test_a_real_post_without_the_token_or_from_another_origin_changes_nothing(
    wd: Paths, tmp_path: Path, server: str
) -> None:
    import urllib.error
    import urllib.request

    from looop_py.web import security

    marker = tmp_path / "never.txt"
    ask = held(wd, {"action": "run_shell", "cmd": f"touch {marker}"})
    base = server.split("/?", maxsplit=1)[0]
    token = server.split("token=")[1]
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

    port = int(base.rsplit(":", 1)[1])
    cookie = {"Cookie": f"{security.cookie_name(port)}={token}"}
    assert post({}) == 401
    assert post({**cookie, "Origin": "http://evil.example"}) == 403
    assert post({**cookie, "Origin": base}, data=b"csrf=forged") == 403
    assert post({**cookie, "Origin": base}, data=b"") == 403
    assert security.token_path(wd).read_text().strip() == token
    assert not marker.exists() and mailbox.get_answer(open_wd(wd), ask.id) is None
    assert post({**cookie, "Origin": base}) == 200  # the same POST done right does run
    assert marker.exists()
