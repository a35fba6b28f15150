# Two entry points: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench bench-retrieval setup postgres-server redis-server celery-broker browser stack-test

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch is pinned to the CPU build; pip finds it in the machine's wheel folder (see README).
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/rag-pipeline demo

# The Postgres instance tests start a throwaway server from the Debian package `postgresql`.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
postgres-server:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && \
		 $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql)

# The Celery tests (slow suite) and `make celery-broker` use Debian's redis-server as the broker.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && \
		 $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server)

# A broker for `RAG_EXECUTOR=celery` on this machine (loopback, no persistence); see docs/guides/scaling.md.
celery-broker: redis-server
	redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no

# The slow UI test screenshots the Dagster UI with Debian's Chromium.
browser:
	@command -v chromium >/dev/null 2>&1 || \
		($(SUDO) apt-get update -qq && \
		 $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium)

# The default suite, then the slow one (the Dagster UI in a real browser with screenshots in test-artifacts/,
# the minute-long scheduled-sync, crash and concurrency runs, the simulated week).
test: $(BIN)/.installed postgres-server redis-server browser
	$(BIN)/ruff check .
	$(BIN)/mypy  # the whole package; strict on the domain packages (pyproject.toml [tool.mypy])
	RAG_REQUIRE_POSTGRES=1 $(BIN)/pytest
	RAG_REQUIRE_REDIS=1 $(BIN)/pytest -m slow

# The image built by podman and the Compose stack started, used and torn down (rag_pipeline_tests/stack; root, a
# container engine, ~10 min): not part of `make test`, see docs/guides/container.md.
stack-test: $(BIN)/.installed
	$(SUDO) deploy/container/host_setup.sh
	$(BIN)/pytest -m stack rag_pipeline_tests/stack -v

bench: $(BIN)/.installed
	$(BIN)/python -m bench.ingest

# Retrieval quality and latency (after `make bench`, which builds the bundled index in /tmp/rag_bench).
# SciFact is not shipped (CC BY-NC): download it once, see bench/README.md, or pass SCIFACT=<folder>.
SCIFACT ?= data/beir_scifact
bench-retrieval: $(BIN)/.installed
	@test -f "$(SCIFACT)/corpus.jsonl" || { echo "error: no BEIR SciFact folder at $(SCIFACT) (corpus.jsonl, queries.jsonl, qrels/)." \
		"Download https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip," \
		"unzip it (unzip scifact.zip -d data && mv data/scifact data/beir_scifact)," \
		"or run make bench-retrieval SCIFACT=<folder>; see bench/README.md" >&2; exit 2; }
	$(BIN)/python -m bench.bm25s_reference "$(SCIFACT)" --out bench/results/bm25s_scifact.json
	$(BIN)/rag-pipeline bench --beir "$(SCIFACT)" --data-dir /tmp/rag_bench --extra-reranker fixed \
		--json --out bench/results/scifact > bench/results/scifact.json
	$(BIN)/rag-pipeline bench --beir "$(SCIFACT)" --data-dir /tmp/rag_bench --truncate-at-model-limit \
		--baseline hybrid --extra-reranker fixed --json --out bench/results/scifact_whole_abstracts \
		> bench/results/scifact_whole_abstracts.json
	$(BIN)/python -m bench.retrieval_bundled --data-dir /tmp/rag_bench
	$(BIN)/python -m bench.experiments.hybrid_levers --data-dir /tmp/rag_bench
