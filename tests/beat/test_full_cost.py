"""What a full rules beat pays for its classes and its garbage collector, counted (the full
beat's fixed cost).

Creating a dataclass exec()s each method it generates (Python 3.11): __init__, and for a
frozen one __setattr__ and __delattr__, then __repr__, __eq__ and __hash__ unless told
not to; a class with no docstring also gets one made by inspect.signature. A full beat at
100 goals spent ~20 ms of CPU on that. The records on the decide path say what they are
in a docstring, leave out eq and repr where nothing compares or prints them, and are
frozen to the type checker only where nothing compares them (`@record`); the
count below pins that, so a new record on the path, or eq or repr back on one, shows up
here (and is paid for by a measurement, bench/README.md) instead of slipping in.
"""

from __future__ import annotations

from looop_py.workdir.paths import Paths
from tests.freshbeat import after_full_beat

# Generated methods a warm full rules beat creates (265 before this was counted, with 31
# classes that had no docstring; 181 before the records that nothing compares became
# @record, frozen to mypy only: no __setattr__ and __delattr__ each, looop_py/records.py;
# 127 before the config sections did too, 94 before Usage and Outcome did and a beat with
# no look at history due stopped loading beat/prune.py).
GENERATED_BUDGET = 80

COUNT = """
import dataclasses
made, docless = [], []
create_fn, process = dataclasses._create_fn, dataclasses._process_class

def counted_fn(name, *args, **kwargs):
    made.append(name)
    return create_fn(name, *args, **kwargs)

def counted_class(cls, *args, **kwargs):
    if not cls.__dict__.get("__doc__"):
        docless.append(f"{cls.__module__}.{cls.__qualname__}")
    return process(cls, *args, **kwargs)

dataclasses._create_fn, dataclasses._process_class = counted_fn, counted_class
"""


def _counted(wd: Paths) -> tuple[list[str], list[str]]:
    made, docless = after_full_beat(wd.root, "(made, docless)", before=COUNT)
    return made, docless


def test_a_full_rules_beat_makes_no_docstrings_and_few_methods(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    _counted(wd)  # the first beat looks at history (retention) and fills the caches
    made, docless = _counted(wd)
    assert docless == [], "give each record on the decide path a docstring"
    assert made.count("__init__") > 30, "the count reaches the records (is the hook live?)"
    assert len(made) <= GENERATED_BUDGET, sorted(made)


# Each pass of the collector, and whether the beat's own modules had started to load (the
# door imports cli.output right after turning the collector off).
COLLECTIONS = """
import gc, sys
collected = []

def passed(phase, info):
    if phase == "stop":
        collected.append("looop_py.cli.output" in sys.modules)

gc.callbacks.append(passed)
"""


def test_a_plain_full_beat_runs_without_the_cyclic_collector(wd: Paths) -> None:
    """The process ends with the beat (os._exit), so the collector's passes over all it
    imported and read would free nothing the exit does not: the door turns it off past the
    quiet attempt (console.py). 26 passes at 100 goals before, 94 at 10,000."""
    for i in range(100):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    after_full_beat(wd.root, "0")  # the first beat fills the caches
    enabled, collected = after_full_beat(wd.root, "(gc.isenabled(), collected)", before=COLLECTIONS)
    assert not enabled
    assert True not in collected, f"{collected.count(True)} passes during the beat"
