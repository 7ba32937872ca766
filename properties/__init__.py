"""Hypothesis state machines and the harness that checks every property (SPEC §8, §9, §13)."""
