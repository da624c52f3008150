"""The maker's and the checker's task text.

The intent opens both prompts, so the workers share the framing the loop's
author wrote down. At L1 both also carry the READ-ONLY instruction (and the
runner gets a read-only flag, for runtimes that can enforce it).
"""

from __future__ import annotations

from collections.abc import Sequence

from looop_py.engine.spec import LoopSpec

MAY_WRITE = "You may change files in this workspace to get the task done."
READ_ONLY = "READ-ONLY: leave every file as it is. Look around, then report what you found."
PRIOR_HEADING = "State from previous rounds:"
NO_MAKER_TEXT = "(the maker wrote nothing)"


def maker_prompt(spec: LoopSpec, prior: Sequence[str] = ()) -> str:
    note = MAY_WRITE if spec.level.maker_may_write else READ_ONLY
    text = (
        f"You are the maker for loop `{spec.name}`.\n"
        f"Loop intent: {spec.intent}\n"
        f"Maturity level: {spec.level.label}\n"
        f"{note}\n\n"
        f"Task:\n{spec.maker_prompt}"
    )
    if prior:
        text += f"\n\n{PRIOR_HEADING}\n" + "\n".join(f"- {line}" for line in prior)
    return text


def checker_prompt(spec: LoopSpec, maker_text: str | None) -> str:
    read_only = "" if spec.level.maker_may_write else f"{READ_ONLY}\n"
    shown = maker_text.strip() if maker_text and maker_text.strip() else NO_MAKER_TEXT
    return (
        f"You are the checker for loop `{spec.name}`: nothing is acted on unless you pass it.\n"
        f"Loop intent: {spec.intent}\n"
        f"{read_only}\n"
        "Check the maker's work below. Run the tests and checks available here, look for "
        "regressions, and judge whether acting on it is safe. Finish with status "
        "done only if you would stake your name on it; say what worries you otherwise.\n\n"
        f"The maker's report:\n{shown}\n\n"
        f"What to check:\n{spec.checker_prompt}"
    )
