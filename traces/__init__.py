"""Trace format, public-trace loaders and synthetic traces (the [traces] issue)."""
