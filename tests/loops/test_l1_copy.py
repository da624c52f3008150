"""L1 on a runtime with no read-only mode: the worker runs in a throwaway copy."""

from __future__ import annotations

import time
from pathlib import Path

from looop_py import jsonio
from looop_py.workdir.paths import Paths
from looop_py.workers import launch, records
from tests.conftest import open_wd, wait_for


def test_an_l1_shell_worker_writes_only_into_a_copy_that_is_discarded(
    wd: Paths, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("original\n")
    (ws / "link").symlink_to("keep.txt")
    script = (
        'test "$(cat keep.txt)" = original || exit 9\n'
        "echo changed > keep.txt; echo new > new.txt; rm link\n"
        '"$LOOOP_BIN" done --status done --summary "wrote in a copy"\n'
    )
    launch.start(open_wd(wd), "w1", script, cwd=ws, read_only=True, now=time.time())
    d = wd.sessions / "w1"

    def ended() -> bool:
        return records.read_record(d / records.STATUS).get("state") == "exited"

    wait_for(ended, timeout=20, what="the worker to end")
    assert records.read_record(d / records.STATUS)["exit_code"] == 0
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt", "link"]
    assert (ws / "keep.txt").read_text() == "original\n" and (ws / "link").is_symlink()
    copy = Path(jsonio.read_json(d / records.META)["copy"])
    assert copy.name == records.THROWAWAY and not copy.parent.exists()
    result = jsonio.read_json(d / records.RESULT)
    assert result["status"] == "done" and result["summary"] == "wrote in a copy"
    assert "throwaway copy" in result["read_only"]
    assert jsonio.read_json(d / records.META)["read_only"] == "copy"
