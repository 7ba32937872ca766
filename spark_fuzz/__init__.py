"""Distributed fuzz campaigns on Spark (filled in by the campaign issue)."""
