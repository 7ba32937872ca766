"""Regression tests generated from real mutant finds by `cowcheck replay --to-pytest`."""
