"""Small helpers every stage shares: atomic writes and logs, seeds, array checks, statistics."""
