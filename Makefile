# Two entry points: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench setup

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch is pinned to the CPU build; pip finds it in the machine's wheel folder (see README).
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/rag-pipeline demo

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/pytest

bench: $(BIN)/.installed
	$(BIN)/python bench/ingest.py
