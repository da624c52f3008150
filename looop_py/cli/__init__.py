"""The `looop` command line: click parses, one core function runs, `render` renders.

Kept import-free: the click-free door to `looop pulse` (console.py) imports
`looop_py.cli.output` and `looop_py.cli.pulse`, and must not load click.

app.py loads every verb module to build the command tree, so each command
imports its core module inside the function: `looop claims` then loads
claims, not the loop engine. That is the one reason for the function-local
imports in cli/ (elsewhere each one says its own).
"""
