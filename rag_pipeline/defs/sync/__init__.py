"""Keeping live sources current: the sync sensor and gap check, the sync runs it plans, and reconciliation of
what the source deleted or moved."""
