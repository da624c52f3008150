"""The Python floor for a quiet beat: spawn every sensor at once with posix_spawn, hash with xxh3.

Not part of looop: the least any Python program can do to notice that nothing
changed — start an interpreter, run the sensors concurrently, read their output
and hash it. bench/quiet_beat.py runs it beside `looop pulse` and the bash loop.

    python bench/floor.py WORKDIR
"""

import os
import sys

import xxhash


def main() -> None:
    sensors = os.path.join(sys.argv[1], "sensors")
    names = sorted(n for n in os.listdir(sensors) if n.endswith(".sh"))
    running = []
    for name in names:
        read, write = os.pipe()
        actions = [(os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_CLOSE, read)]
        path = os.path.join(sensors, name)
        pid = os.posix_spawn(path, [path], os.environ, file_actions=actions)
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
    main()
