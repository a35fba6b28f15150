"""What the benchmarks and experiments share: where things are, which machine ran, how results are written.

Every script runs from the repository root as a module, so ``bench`` and ``rag_pipeline_tests`` import without
any path set-up::

    .venv/bin/python -m bench.<name> [options]
    .venv/bin/python -m bench.experiments.<name> [options]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.machine import machine as describe_this_machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
EXPERIMENT_RESULTS = ROOT / "bench" / "experiments" / "results"
EVAL_SETS = ROOT / "eval_sets"
# The bundled dev eval sets, in the order the reports list them.
DEV_SETS = ("slack_ubuntu_dev", "jira_appcelerator_dev", "acl_bundled_dev")
# The data folder `make bench` (bench.ingest) indexes the bundled data into.
BENCH_DATA_DIR = Path("/tmp/rag_bench")

# BEIR SciFact is CC BY-NC 2.0 (non-commercial): not shipped. The user downloads it once (bench/README.md).
SCIFACT_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
SCIFACT_DOWNLOAD = f"curl -LO {SCIFACT_URL} && unzip scifact.zip -d data && mv data/scifact data/beir_scifact"
DEFAULT_SCIFACT = ROOT / "data" / "beir_scifact"

# Instruction sets that decide what the dense encoder can run natively (bf16, int8 dot products).


# -- arguments ----------------------------------------------------------------------------------------------------


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` prints the script's docstring as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_index_arguments(parser: argparse.ArgumentParser, data_dir: Path = BENCH_DATA_DIR) -> None:
    """``--data-dir`` (an indexed data folder) and ``--eval-dir`` (the eval sets)."""
    parser.add_argument("--data-dir", type=Path, default=data_dir, help="indexed data folder (default: %(default)s)")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_SETS, help="eval sets (default: %(default)s)")


# -- BEIR ---------------------------------------------------------------------------------------------------------


def scifact_folder() -> Path:
    """The BEIR SciFact folder: ``$SCIFACT``, else ``data/beir_scifact`` in the repository (ignored by git)."""
    return Path(os.environ.get("SCIFACT") or DEFAULT_SCIFACT)


def require_beir(folder: Path) -> Path:
    """``folder`` if it holds a BEIR dataset; otherwise stop with the download command."""
    if not (folder / "corpus.jsonl").is_file():
        raise SystemExit(
            f"error: no BEIR dataset at {folder} (corpus.jsonl, queries.jsonl, qrels/). Download SciFact once: "
            f"{SCIFACT_DOWNLOAD}; or pass the folder (SCIFACT=<folder>); see bench/README.md"
        )
    return folder


def scifact_texts(n: int, folder: Path | None = None) -> list[str]:
    """The first ``n`` abstracts of a BEIR corpus (title and text), default SciFact."""
    corpus = require_beir(folder or scifact_folder()) / "corpus.jsonl"
    texts = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record['title']}\n{record['text']}")
            if len(texts) == n:
                break
    return texts


def beir_bench(
    folder: Path, options: Sequence[str], data_dir: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """``rag-pipeline bench --beir FOLDER OPTIONS --json --data-dir DATA_DIR`` in a child process (``env`` added to
    this process's): its JSON figures plus ``seconds``. Stops with the command's error output when it fails."""
    command = [str(Path(sys.executable).parent / "rag-pipeline"), "bench", "--beir", str(folder), *options]
    command += ["--json", "--data-dir", str(data_dir)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures


# -- the machine --------------------------------------------------------------------------------------------------


def rag_pipeline(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``rag-pipeline`` CLI of this environment; exits naming the command and its stderr's end on failure."""
    command = [str(Path(sys.executable).parent / "rag-pipeline"), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done


def machine(encoder: Any | None = None) -> dict[str, Any]:
    """CPU model, instruction sets, cores, Python and, given one, the dense encoder's model, backend and precision
    (:func:`rag_pipeline.machine.machine`, as the demo's summary prints them)."""
    return describe_this_machine(encoder)


def command_line(argv: Sequence[str] | None = None) -> str:
    """How this run was started: ``python -m bench.<name> ARGS`` (``argv`` defaults to ``sys.argv[1:]``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    target = ["-m", spec.name] if spec is not None and spec.name else [sys.argv[0]]
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", *target, *(shlex.quote(a) for a in args)])


def run_record(encoder: object | None = None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The date, the command and the machine of this run, for its result file."""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": command_line(argv),
        "machine": machine(encoder),
    }


# -- results and timing -------------------------------------------------------------------------------------------


def write_json(path: Path, data: Any, *, indent: int | None = 2, **dumps: Any) -> Path:
    """``data`` as JSON in ``path`` (its folder created), with a final newline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, **dumps) + "\n", encoding="utf-8")
    return path


def read_json(path: Path) -> Any:
    """A results file's contents, or an empty dict when it does not exist yet (scripts that merge into it)."""
    return json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).exists() else {}


def latency_ms(seconds: Sequence[float], digits: int = 2) -> dict[str, float]:
    """Median and 95th percentile (nearest rank, rounded down) in milliseconds, and the sample count."""
    ordered = sorted(seconds)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, digits),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, digits),
        "n": len(ordered),
    }


def cpu_and_wall_ms(encode: Callable[[Sequence[str]], np.ndarray], texts: list[str]) -> tuple[np.ndarray, float, float]:
    """The vectors of one ``encode(texts)``, its CPU ms per text (every thread of the process) and wall ms per
    text."""
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = encode(texts)
    return vectors, (time.process_time() - cpu) * 1000 / len(texts), (time.perf_counter() - wall) * 1000 / len(texts)


def dev_questions(
    limit: int, sets: Sequence[str] = ("slack_ubuntu_dev", "jira_appcelerator_dev"), cut: int = 300
) -> list[str]:
    """The first ``limit`` questions of the bundled dev sets, shared between ``sets``, each cut at ``cut`` characters
    (a Jira question is a whole issue description)."""
    out: list[str] = []
    for name in sets:
        lines = (EVAL_SETS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        out += [json.loads(line)["query"][:cut] for line in lines[: limit // len(sets)]]
    return out


def demo_reader_groups(data_dir: Path) -> str:
    """X-User-Groups of a reader of the whole bundled demo (its Slack workspace and every Jira project), for benches
    that serve it behind a trusted proxy."""
    identities = json.loads((data_dir / "source_identities.json").read_text())
    team, site = identities["slack"]["team_id"], identities["jira"]["site"]
    projects = ("TIMOB", "AC", "ALOY", "MOD", "DAEMON")
    return ",".join([f"slack:{team}:members", *(f"jira:{site}:project:{p}" for p in projects)])
