"""The `looop` command line: click parses, one core function runs, `render` renders.

Kept import-free: the click-free door to `looop pulse` (console.py) imports
`looop_py.cli.output` and `looop_py.cli.pulse`, and must not load click.
"""
