"""Data builders: scripts that produce files the repository ships (for example the man-page eval sets under
``eval_sets/``). Run from the repository root: ``.venv/bin/python -m tools.<name> --help``.
"""
