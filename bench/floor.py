"""The Python floor for a quiet beat: spawn every sensor at once with posix_spawn, hash with xxh3.

Not part of looop: the least any Python program can do to notice that nothing
changed — start an interpreter, run the sensors concurrently, read their output
and hash it. bench/quiet_beat.py runs it beside `looop pulse` and the bash loop.

    python bench/floor.py [--lean] WORKDIR

--lean: also do the two things looop does that this floor did not: exec a
`#!/usr/bin/env NAME` sensor's NAME at once (NAME found on PATH, as env would; looop's
shebang.py, which also checks what env would refuse), and end with os._exit, skipping
the interpreter's teardown (looop's console.leave).
"""

import os
import sys

import xxhash


def _direct(path: str) -> tuple[str, list[str]]:
    """(what to exec, its argv): NAME for a `#!/usr/bin/env NAME` script, else the script."""
    with open(path, "rb") as f:
        first = f.readline(256)
    if first.startswith(b"#!/usr/bin/env ") and first.endswith(b"\n"):
        name = first[15:].strip().decode()
        for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
            candidate = os.path.join(folder, name)
            if os.access(candidate, os.X_OK):
                return candidate, [name, path]
    return path, [path]


def main(lean: bool = False) -> None:
    sensors = os.path.join(sys.argv[-1], "sensors")
    names = sorted(n for n in os.listdir(sensors) if n.endswith(".sh"))
    running = []
    for name in names:
        read, write = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_CLOSE, read)]
        path = os.path.join(sensors, name)
        program, argv = _direct(path) if lean else (path, [path])
        pid = os.posix_spawn(program, argv, os.environ, file_actions=actions)
        os.close(write)
        running.append((pid, read))
    digest = xxhash.xxh3_128()
    for pid, read in running:
        while chunk := os.read(read, 65536):
            digest.update(chunk)
        os.close(read)
        os.waitpid(pid, 0)
    digest.hexdigest()


if __name__ == "__main__":
    lean = "--lean" in sys.argv
    main(lean)
    if lean:
        sys.stdout.flush()
        os._exit(0)
