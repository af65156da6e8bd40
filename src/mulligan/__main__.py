from mulligan.cli import run

run()
