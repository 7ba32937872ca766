"""The checkpoint machine: key-grouped tables, the two-phase checkpoint write and restore (docs/contract.md §10–§11).

- ``ops``: the operations (keyed writes and reads on two states, checkpoints, restores);
- ``harness``: drives a backend against the checkpoint model, checks P1/P4/P6/P7 and C1–C5;
- ``machine``: the Hypothesis state machine and ``small_backend``; ``mutants``: the write path's seeded bugs.

Importing this package registers the machine (and its mutants) with
:mod:`cowcheck.core.machine`.
"""

from __future__ import annotations

from cowcheck.checkpoint import mutants  # noqa: F401  (registers the checkpoint path's seeded bugs)
from cowcheck.checkpoint.harness import CHECKPOINT_SCENARIOS, CheckpointHarness
from cowcheck.checkpoint.machine import CheckpointMachineConfig, make_checkpoint_machine, replay_setup, small_backend
from cowcheck.checkpoint.ops import CHECKPOINT_OPS
from cowcheck.checkpoint.walks import walk
from cowcheck.core.impls import Implementation, probe_by_harness
from cowcheck.core.machine import MachineKind, register_machine

__all__ = ["CHECKPOINT", "CheckpointHarness", "CheckpointMachineConfig", "make_checkpoint_machine", "small_backend"]

CHECKPOINT = MachineKind(
    name="checkpoint",
    summary="the heap backend's checkpoint write and restore",
    operations=CHECKPOINT_OPS,
    harness_class=CheckpointHarness,
    builder=make_checkpoint_machine,
    config_class=CheckpointMachineConfig,
    replay_setup=replay_setup,
    builtins={"reference": lambda: Implementation("reference", small_backend(), True,
                                                  "reference heap keyed state backend")},
    probe=probe_by_harness,
    scenarios=CHECKPOINT_SCENARIOS,
    walker=walk,
    api=("register_state", "state", "checkpoint"),
    sample=lambda factory: factory(),
)
register_machine(CHECKPOINT)
