"""Notifications to people: Slack messages about failed runs and failed evaluation checks."""
