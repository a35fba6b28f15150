"""Finished experiments: one-off measurements whose conclusion is recorded (bench/README.md, docs/notes/,
docs/decisions/), kept to be rerun when the question comes back. Results in ``bench/experiments/results/``.

Run from the repository root: ``.venv/bin/python -m bench.experiments.<name> --help``.
"""
