"""Parallel attempts: N tries from one entry, each in its own folder; compared, one adopted."""
