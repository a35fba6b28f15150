"""Benchmarks: every figure the project reports, rerunnable (bench/README.md lists each with its command).

Run from the repository root as modules: ``.venv/bin/python -m bench.<name> --help``. Shared helpers (paths,
the machine's description, result files, the BEIR set-up) are in :mod:`bench.common`; finished experiments,
kept with their result files, in :mod:`bench.experiments`. Data builders are in ``tools/``.
"""
