"""`looop serve` and `looop report --html`: the human side of the loop as a page.

Only web/app.py imports the web stack (Starlette, uvicorn); the rest is plain
Python, so `looop report` and the quiet beat never load it.
"""
