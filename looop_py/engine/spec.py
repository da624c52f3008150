"""LoopSpec: the inert description of a loop, as data.

A spec names the loop, states its intent in one sentence (shown in every prompt
and report, so drift between what it was meant to do and what it does stays
visible), and fixes its level, cadence, budget, prompts and the action kind it
proposes. It holds no live objects, so it serializes, diffs and tests on its own.

In a work dir a loop is a goal file whose YAML frontmatter carries loop fields:

    ---
    intent: Keep the default branch green by proposing fixes for CI failures.
    level: L2-assisted
    cadence: every 10m
    budget: {max_total_tokens: 400000, max_iters_per_round: 20, max_wall_s: 1800}
    action: apply-patch
    allow: [apply-patch]
    on: [ci]
    runtime: claude
    target: repo-main
    maker: |
      …
    checker: |
      …
    ---
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from looop_py.engine.budget import BudgetError, TokenBudget
from looop_py.engine.levels import LoopLevel
from looop_py.errors import UsageError
from looop_py.ids import is_safe_segment

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_CADENCE = "daily 09:00"  # a LoopSpec built in code; see ON_DEMAND for goal files
# A goal file whose frontmatter has no `cadence:` is a loop that runs only on demand
# (start_round, `looop run`, an `on:` sensor): never on a schedule nobody wrote.
ON_DEMAND = ""
DEFAULT_ACTION = "report"

# Frontmatter keys that make a goal a loop. `on:` only routes sensor changes, and
# `runtime:`/`target:` also belong to plain goals that start a worker.
LOOP_KEYS = frozenset({"level", "cadence", "budget", "action", "allow", "maker", "checker"})
SPEC_KEYS = LOOP_KEYS | {
    "runtime",
    "target",
    "maker_runtime",
    "checker_runtime",
    "memory_ttl_days",
}
# How long a loop's memory entry is recalled (`memory_ttl_days:`; null keeps them forever).
DEFAULT_MEMORY_TTL_DAYS = 30.0
MAX_MEMORY_TTL_DAYS = 36_600.0  # a hundred years: past that, write null
# Frontmatter key -> LoopSpec field, where the two differ.
_FRONTMATTER_NAMES = {"action": "action_kind", "maker": "maker_prompt", "checker": "checker_prompt"}


class LoopSpecError(UsageError):
    """A loop definition that cannot be used as written."""


@dataclass(frozen=True)
class LoopSpec:
    name: str
    intent: str
    level: LoopLevel
    cadence: str = DEFAULT_CADENCE
    budget: TokenBudget = field(default_factory=TokenBudget)
    maker_prompt: str = ""
    checker_prompt: str = ""
    action_kind: str = DEFAULT_ACTION
    allow: tuple[str, ...] = ()  # kinds an L3 loop may carry out alone
    on: tuple[str, ...] = ()  # sensors whose change should start a round
    runtime: str | None = None  # worker runtime for maker and checker (None: the default)
    target: str | None = None  # claim name for the round (None: the loop's own claim)
    # a role's own runtime (a strong maker, a checker from another vendor); None: `runtime`
    maker_runtime: str | None = None
    checker_runtime: str | None = None
    # days a round's memory entry is recalled before it is pruned; None: kept forever
    memory_ttl_days: float | None = DEFAULT_MEMORY_TTL_DAYS

    def with_cadence(self, cadence: str) -> LoopSpec:
        return replace(self, cadence=cadence)

    def with_budget(self, budget: TokenBudget) -> LoopSpec:
        return replace(self, budget=budget)

    def with_maker_prompt(self, prompt: str) -> LoopSpec:
        return replace(self, maker_prompt=prompt)

    def with_checker_prompt(self, prompt: str) -> LoopSpec:
        return replace(self, checker_prompt=prompt)

    def with_action_kind(self, kind: str) -> LoopSpec:
        return replace(self, action_kind=kind)

    def with_level(self, level: LoopLevel | str) -> LoopSpec:
        return replace(self, level=LoopLevel.parse(level))

    def with_allow(self, *kinds: str) -> LoopSpec:
        return replace(self, allow=tuple(kinds))

    def with_on(self, *sensors: str) -> LoopSpec:
        return replace(self, on=tuple(sensors))

    def with_runtime(self, runtime: str | None) -> LoopSpec:
        return replace(self, runtime=runtime)

    def with_target(self, target: str | None) -> LoopSpec:
        return replace(self, target=target)

    def with_role_runtimes(self, maker: str | None, checker: str | None) -> LoopSpec:
        return replace(self, maker_runtime=maker, checker_runtime=checker)

    def with_memory_ttl_days(self, days: float | None) -> LoopSpec:
        return replace(self, memory_ttl_days=_ttl_days({"memory_ttl_days": days}))

    def memory_expires(self, created: float) -> float | None:
        """When an entry recorded at `created` stops being recalled (None: never)."""
        if self.memory_ttl_days is None:
            return None
        return created + self.memory_ttl_days * 86_400.0

    def runtime_for(self, role: str) -> str | None:
        """The runtime the maker or the checker runs on: its own, else the loop's."""
        own = self.maker_runtime if role == "maker" else self.checker_runtime
        return own or self.runtime

    @property
    def claim_name(self) -> str:
        """What a round claims: the target, else the loop itself (one round per loop)."""
        return self.target or f"loop-{self.name}"

    # -- dict / JSON ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "intent": self.intent,
            "level": self.level.value,
            "cadence": self.cadence,
            "budget": self.budget.to_dict(),
            "maker_prompt": self.maker_prompt,
            "checker_prompt": self.checker_prompt,
            "action_kind": self.action_kind,
            "allow": list(self.allow),
            "on": list(self.on),
            "runtime": self.runtime,
            "target": self.target,
            "maker_runtime": self.maker_runtime,
            "checker_runtime": self.checker_runtime,
            "memory_ttl_days": self.memory_ttl_days,
        }

    @classmethod
    def from_dict(cls, data: Any) -> LoopSpec:
        """The inverse of to_dict. Missing optional fields take their defaults."""
        if not isinstance(data, dict):
            raise LoopSpecError(f"a loop spec should be a mapping, got {type(data).__name__}")
        known = {
            "name",
            "intent",
            "level",
            "cadence",
            "budget",
            "maker_prompt",
            "checker_prompt",
            "action_kind",
            "allow",
            "on",
            "runtime",
            "target",
            "maker_runtime",
            "checker_runtime",
            "memory_ttl_days",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise LoopSpecError(f"unknown loop spec field {unknown[0]!r}")
        for required in ("name", "intent", "level"):
            if required not in data:
                raise LoopSpecError(f"a loop spec needs {required!r}")
        try:
            budget = TokenBudget.from_dict(data.get("budget"))
        except BudgetError as exc:
            raise LoopSpecError(exc.message, exc.hint) from None
        return cls(
            name=_text(data, "name"),
            intent=_text(data, "intent"),
            level=LoopLevel.parse(data["level"]),
            cadence=_text(data, "cadence", DEFAULT_CADENCE),
            budget=budget,
            maker_prompt=_text(data, "maker_prompt", ""),
            checker_prompt=_text(data, "checker_prompt", ""),
            action_kind=_text(data, "action_kind", DEFAULT_ACTION),
            allow=_words(data, "allow"),
            on=_words(data, "on"),
            runtime=_optional_text(data, "runtime"),
            target=_optional_text(data, "target"),
            maker_runtime=_optional_text(data, "maker_runtime"),
            checker_runtime=_optional_text(data, "checker_runtime"),
            memory_ttl_days=_ttl_days(data),
        )

    def to_json(self) -> str:
        import json  # the engine is pure: the standard library's codec, not looop's file I/O

        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> LoopSpec:
        import json  # as in to_json

        return cls.from_dict(json.loads(text))

    # -- goal frontmatter -------------------------------------------------------------

    @classmethod
    def from_frontmatter(cls, name: str, meta: dict[str, Any]) -> LoopSpec:
        """A spec from a goal's frontmatter; `name` is the goal id unless `name:` is given.

        Checked more strictly than a spec built in code, because a person wrote
        it: the cadence must parse, names must be safe, and a key that looks
        like a misspelt loop key is an error rather than silently ignored.
        """
        name = str(meta.get("name") or name)
        if not is_safe_segment(name):
            raise LoopSpecError(
                f"loop name {name!r} is not a safe name",
                "use letters, digits, '.', '_' and '-'",
            )
        _reject_typos(name, meta)
        intent = meta.get("intent") or meta.get("goal")
        if not isinstance(intent, str) or not intent.strip():
            raise LoopSpecError(
                f"loop {name} has no intent",
                "add `intent:` (one sentence: what this loop is for) to the frontmatter",
            )
        data: dict[str, Any] = {"name": name, "intent": intent.strip()}
        data["level"] = meta.get("level", LoopLevel.L1_REPORT.value)
        for key in sorted(SPEC_KEYS - {"level"}):
            if key in meta and meta[key] is not None:
                data[_FRONTMATTER_NAMES.get(key, key)] = meta[key]
        if "memory_ttl_days" in meta:  # null is meaningful here: keep entries forever
            data["memory_ttl_days"] = meta["memory_ttl_days"]
        if "on" in meta and meta["on"] is not None:
            data["on"] = meta["on"]
        if meta.get("cadence") is None:
            data["cadence"] = ON_DEMAND
        try:
            spec = cls.from_dict(data)
        except UsageError as exc:
            raise LoopSpecError(f"loop {name}: {exc.message}", exc.hint) from None
        spec.check()
        return spec

    def check(self) -> None:
        """Raise LoopSpecError if the cadence or any name would break a round."""
        from looop_py.engine.cadence import Schedule  # cadence parsing is loaded on demand

        try:
            if self.cadence != ON_DEMAND:
                Schedule.parse(self.cadence)
        except UsageError as exc:
            raise LoopSpecError(f"loop {self.name}: {exc.message}", exc.hint) from None
        for what, value in (
            ("action", self.action_kind),
            ("target", self.target),
            *(("allow", kind) for kind in self.allow),
        ):
            if value is not None and not is_safe_segment(value):
                raise LoopSpecError(
                    f"loop {self.name}: {what} {value!r} is not a safe name",
                    "use letters, digits, '.', '_' and '-'",
                )
        if not self.intent.strip():
            raise LoopSpecError(f"loop {self.name} has an empty intent")


def is_loop(meta: dict[str, Any]) -> bool:
    """Does this goal frontmatter describe a loop (and not just a plain goal)?"""
    return any(key in meta for key in LOOP_KEYS)


def _reject_typos(name: str, meta: dict[str, Any]) -> None:
    """A key that looks like a misspelt loop key is an error; other keys belong to the goal."""
    import difflib  # only to suggest the key a typo meant

    keys = sorted(SPEC_KEYS | {"intent", "on"})
    for key in sorted(set(meta) - set(keys)):
        close = difflib.get_close_matches(key.lower(), keys, n=1, cutoff=0.75)
        if close:
            raise LoopSpecError(
                f"loop {name}: unknown frontmatter key {key!r}", f"did you mean {close[0]!r}?"
            )


def _text(data: dict[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise LoopSpecError(f"{key} should be text, got {value!r}")
    return value


def _optional_text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise LoopSpecError(f"{key} should be a non-empty name, got {value!r}")
    return value.strip()


def _ttl_days(data: dict[str, Any]) -> float | None:
    """`memory_ttl_days`: a positive number of days up to the maximum, or null (forever)."""
    if "memory_ttl_days" not in data:
        return DEFAULT_MEMORY_TTL_DAYS
    value = data["memory_ttl_days"]
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0 < value <= MAX_MEMORY_TTL_DAYS:  # NaN fails the range too
        raise LoopSpecError(
            f"memory_ttl_days should be a number of days above 0 and at most"
            f" {MAX_MEMORY_TTL_DAYS:g}, got {str(value)[:40]!r}",
            "or null to keep the loop's memory forever",
        )
    return float(value)


def _words(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise LoopSpecError(f"{key} should be a list of names, got {value!r}")
    return tuple(value)
