"""Hypothesis state machines and the harness that checks every property (docs/contract.md §8, §9, §13)."""
