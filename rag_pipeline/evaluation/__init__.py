"""Evaluation: eval sets (and, in later issues, metrics, significance and reports)."""
