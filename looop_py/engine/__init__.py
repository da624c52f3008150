"""The loop engine: a goal turned into a repeatable, budgeted, gated loop.

    levels     LoopLevel, ProposedAction, GateDecision and the built-in gates
    budget     TokenBudget, BudgetLimit, BudgetState
    spec       LoopSpec, read from a goal file's frontmatter
    cadence    Schedule: every / daily / weekly / cron, in local time
    actions    what runs once a proposal is approved
    ports      the data the engine exchanges with workers, claims, the mailbox, memory
    protocols  the interfaces the rest of looop implements for the engine
    inproc     in-process versions of those interfaces (defaults, and the tests' fakes)
    memory     memory/<loop>.jsonl, each loop's state spine
    prompts    the maker's and the checker's task text
    rounds     one round as a persisted state machine, advanced a step at a time
    report     RoundOutcome and RoundReport
    loop       LoopEngine: drives a round to its end
    scheduler  LoopScheduler: fires loops when their cadence is due
    signals    the cheap reads the pulse makes every beat (sys-rounds, sys-schedules)
    patterns   the seven ready-made loops

This file imports nothing, so importing one submodule stays cheap.
"""
