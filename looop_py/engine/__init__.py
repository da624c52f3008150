"""The loop engine: a goal turned into a repeatable, budgeted, gated loop.

    levels     LoopLevel, ProposedAction, GateDecision and the built-in gates
    budget     TokenBudget, BudgetLimit, BudgetState
    spec       LoopSpec, parsed from a goal's frontmatter (a dict)
    cadence    Schedule: every / daily / weekly / cron, in local time
    actions    what runs once a proposal is approved
    ports      the data the engine exchanges with workers, claims, the mailbox, memory
    protocols  the interfaces the rest of looop implements for the engine
    inproc     in-process versions of those interfaces (defaults, and the tests' fakes)
    prompts    the maker's and the checker's task text
    rounds     one round as data: its phases and its state
    steps      the round state machine, advanced a step at a time
    report     RoundOutcome and RoundReport
    loop       LoopEngine: drives a round to its end
    scheduler  ScheduleBook (when each loop is due) and LoopScheduler
    patterns   the seven ready-made loops, and an offline demo

The engine is pure: it reads no file and starts no process, and imports
nothing from the work-dir side of looop (an import contract in pyproject.toml
holds it to that). looop_py/loops/ binds it to a work dir. This file imports
nothing, so importing one submodule stays cheap.
"""
