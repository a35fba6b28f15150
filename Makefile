# Two entry points: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench bench-retrieval setup

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

# Retrieval quality and latency (after `make bench`, which builds the bundled index in /tmp/rag_bench).
bench-retrieval: $(BIN)/.installed
	$(BIN)/python bench/bm25s_reference.py ../shared/data/beir_scifact --out bench/results/bm25s_scifact.json
	$(BIN)/rag-pipeline bench --beir ../shared/data/beir_scifact --data-dir /tmp/rag_bench --extra-reranker fixed \
		--json --out bench/results/scifact > bench/results/scifact.json
	$(BIN)/rag-pipeline bench --beir ../shared/data/beir_scifact --data-dir /tmp/rag_bench --truncate-at-model-limit \
		--baseline hybrid --extra-reranker fixed --json --out bench/results/scifact_whole_abstracts \
		> bench/results/scifact_whole_abstracts.json
	$(BIN)/python bench/retrieval_bundled.py --data-dir /tmp/rag_bench
