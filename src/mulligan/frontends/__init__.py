"""Frontends: folds over the events of a run. Each one is handed every event in order and turns
them into something for a person or a program -- JSON lines, the final answer, a live terminal
view, the REPL. A frontend decides nothing about the run: the loop never learns what its events
look like, and nothing in the core imports this package.

Importing this package imports none of its modules (so ``mulligan.frontends.json_lines`` does
not pull in the terminal libraries the live view needs).
"""
