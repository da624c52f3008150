"""Real sensor processes: every normalization case, timeouts, caps, intervals, pruning."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from looop_py import jsonio
from looop_py.sensing.sensors import Reading, discover, sense
from looop_py.workdir.config import Config
from looop_py.workdir.environ import child_env
from looop_py.workdir.paths import Paths
from tests.conftest import wait_for, write_sensor


def run_all(
    wd: Paths, *, cap: int = 8192, timeout: float = 10, now: float | None = None
) -> dict[str, Reading]:
    found = discover(wd, timeout)
    readings = sense(
        wd,
        found,
        env=child_env(wd, config=Config()),
        cap=cap,
        concurrency=8,
        now=time.time() if now is None else now,
    )
    return {r.stem.removeprefix("sensor-"): r for r in readings}


def snapshot(wd: Paths, name: str) -> dict:
    return jsonio.read_json(wd.snapshot(f"sensor-{name}"))


def test_every_kind_of_output_is_normalized(wd: Paths) -> None:
    write_sensor(wd, "sig", 'echo \'{"signal": {"n": 1}, "detail": {"at": 5}}\'')
    write_sensor(wd, "json", "echo '[1, 2, 3]'")
    write_sensor(wd, "text", "printf '  hello world \\n'")
    write_sensor(wd, "fail", "echo oops >&2; exit 3")
    write_sensor(wd, "killed", "kill -9 $$")
    write_sensor(wd, "noexec", "echo hi", mode=0o644)
    write_sensor(wd, "badinterp", "#!/no/such/interpreter\necho hi\n")
    write_sensor(wd, "big", "head -c 100000 /dev/zero | tr '\\0' x")
    write_sensor(wd, "latin1", "printf 'caf\\xe9'")
    write_sensor(wd, "noshebang", "")
    (wd.sensors / "noshebang.sh").write_text("echo from-bash-fallback\n")

    r = run_all(wd)
    assert snapshot(wd, "sig") == {"signal": {"n": 1}, "detail": {"at": 5}}
    assert snapshot(wd, "json") == {"signal": [1, 2, 3], "detail": {}}
    assert snapshot(wd, "text") == {"signal": "hello world", "detail": {}}
    assert snapshot(wd, "fail")["signal"] == {"error": True, "exit_code": 3}
    assert snapshot(wd, "fail")["detail"]["stderr"] == "oops"
    assert snapshot(wd, "killed")["signal"] == {"error": True, "exit_code": 137}
    assert snapshot(wd, "noexec")["signal"] == {"error": True, "exit_code": 126}
    assert snapshot(wd, "badinterp")["signal"] == {"error": True, "exit_code": 127}
    assert snapshot(wd, "big")["signal"] == {"error": "too-large", "cap": 8192}
    assert snapshot(wd, "big")["detail"]["bytes"] == 100000
    assert snapshot(wd, "latin1")["signal"] == {"error": "not-utf8"}
    assert snapshot(wd, "noshebang") == {"signal": "from-bash-fallback", "detail": {}}
    assert {n for n, x in r.items() if x.ok} == {"sig", "json", "text", "noshebang"}


def test_sensor_runs_in_work_dir_with_looop_env(wd: Paths) -> None:
    write_sensor(
        wd,
        "env",
        'printf \'{"signal": ["%s", "%s", "%s"]}\' "$PWD" "$LOOOP_DIR" '
        '"$( [ -x "$LOOOP_BIN" ] && echo exec || echo "$LOOOP_BIN")"',
    )
    run_all(wd)
    assert snapshot(wd, "env")["signal"] == [str(wd.root), str(wd.root), "exec"]


def _descendants_alive(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _wait_ended(marker: str) -> None:
    """The `sleep 300` under `marker` ends within a second: ended by looop, not by its time."""
    wait_for(lambda: _descendants_alive(marker) == [], 1, f"{marker} to end")


@pytest.mark.slow
def test_hung_sensor_with_background_child_holding_stdout(wd: Paths) -> None:
    marker = f"looop-test-hang-{os.getpid()}"
    # The background child inherits stdout and never closes it; the script hangs too.
    write_sensor(wd, "hung", f"# looop:timeout=1\n(exec -a {marker} sleep 300) &\nsleep 300\n")
    write_sensor(wd, "fine", "echo ok")
    start = time.monotonic()
    r = run_all(wd)
    elapsed = time.monotonic() - start
    assert elapsed < 2.0, elapsed
    assert snapshot(wd, "hung")["signal"] == {"error": True, "exit_code": 124}
    assert r["fine"].ok
    _wait_ended(marker)


def test_straggler_left_by_a_finished_sensor_is_ended(wd: Paths) -> None:
    marker = f"looop-test-straggler-{os.getpid()}"
    write_sensor(wd, "leaky", f"(exec -a {marker} sleep 300) &\necho done\n")
    start = time.monotonic()
    run_all(wd, timeout=30)
    assert time.monotonic() - start < 2.0
    assert snapshot(wd, "leaky")["signal"] == "done"
    _wait_ended(marker)


def test_sensors_run_concurrently(wd: Paths) -> None:
    for i in range(8):
        write_sensor(wd, f"slow{i}", "sleep 0.5; echo ok")
    start = time.monotonic()
    r = run_all(wd)
    assert time.monotonic() - start < 1.5
    assert all(x.ok for x in r.values())


def test_huge_output_is_counted_not_kept(wd: Paths) -> None:
    write_sensor(wd, "flood", "head -c 50000000 /dev/zero")
    before = psutil.Process().memory_info().rss
    run_all(wd, cap=1024)
    grown = psutil.Process().memory_info().rss - before
    snap = snapshot(wd, "flood")
    assert snap["signal"] == {"error": "too-large", "cap": 1024}
    assert snap["detail"]["bytes"] == 50_000_000
    assert grown < 20 * 1024 * 1024


def test_interval_header_reuses_a_fresh_snapshot(wd: Paths) -> None:
    counter = wd.root / "count"
    script = write_sensor(
        wd,
        "slowly",
        f"# looop:interval=3600\nn=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 ))"
        f"\necho $n > {counter}\necho $n\n",
    )
    first = run_all(wd)
    assert first["slowly"].snapshot["signal"] == 1 and not first["slowly"].cached
    second = run_all(wd)
    assert second["slowly"].cached and second["slowly"].snapshot["signal"] == 1
    # Editing the script re-runs it at once, interval or not.
    time.sleep(0.01)
    script.write_text(script.read_text() + "\n")
    third = run_all(wd)
    assert not third["slowly"].cached and third["slowly"].snapshot["signal"] == 2
    # Past the interval it runs again.
    fourth = run_all(wd, now=time.time() + 7200)
    assert not fourth["slowly"].cached and fourth["slowly"].snapshot["signal"] == 3


def test_timeout_header_overrides_the_default(wd: Paths) -> None:
    write_sensor(wd, "quick", "# looop:timeout=0.3\nsleep 5\n")
    start = time.monotonic()
    run_all(wd, timeout=60)
    assert time.monotonic() - start < 1.5
    assert snapshot(wd, "quick")["signal"]["exit_code"] == 124


def test_deleted_sensor_snapshot_is_pruned_and_unrelated_files_stay(wd: Paths) -> None:
    write_sensor(wd, "gone", "echo 1")
    write_sensor(wd, "stays", "echo 2")
    run_all(wd)
    (wd.sensors / "gone.sh").unlink()
    wd.snapshot("sys-claims").write_text('{"signal": [], "detail": {}}')
    run_all(wd)
    names = sorted(p.name for p in wd.snapshots.iterdir())
    assert names == ["sensor-stays.json", "sys-claims.json"]


def test_unchanged_snapshot_is_not_rewritten(wd: Paths) -> None:
    write_sensor(wd, "same", "echo same")
    run_all(wd)
    ino = wd.snapshot("sensor-same").stat().st_ino
    run_all(wd)
    assert wd.snapshot("sensor-same").stat().st_ino == ino  # no rename happened


def test_non_sh_files_and_unsafe_names_are_ignored(wd: Paths) -> None:
    (wd.sensors / "README.md").write_text("notes")
    (wd.sensors / ".hidden.sh").write_text("echo x")
    write_sensor(wd, "real", "echo 1")
    assert [s.name for s in discover(wd, 5)] == ["real"]


@pytest.mark.parametrize("n", [0, 1])
def test_zero_or_one_sensor(wd: Paths, n: int) -> None:
    for i in range(n):
        write_sensor(wd, f"s{i}", "echo 1")
    assert len(run_all(wd)) == n


def test_snapshot_files_are_valid_json_with_signal_and_detail(wd: Paths) -> None:
    write_sensor(wd, "a", "echo text")
    write_sensor(wd, "b", "exit 1")
    run_all(wd)
    for p in Path(wd.snapshots).glob("sensor-*.json"):
        data = jsonio.read_json(p)
        assert set(data) >= {"signal", "detail"}
