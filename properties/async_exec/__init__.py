"""The async machine: Flink's FLIP-424 AsyncExecutionController (docs/contract.md §12), registered as machine ``async``.

- ``ops``: the operations (record arrivals, time, triggers, drains, mailbox runs);
- ``harness``: drives a controller against the serial model, checks A1–A10;
- ``machine``: the Hypothesis state machine; ``mutants``: the controller's seeded bugs.

(The package is not called ``async``: that is a Python keyword.) Importing it
registers the machine (and its mutants) with :mod:`cowcheck.core.machine`.
"""

from __future__ import annotations

from cowcheck.async_exec import mutants  # noqa: F401  (registers the controller's seeded bugs)
from cowcheck.async_exec.harness import ASYNC_SCENARIOS, AsyncHarness, AsyncMachineConfig
from cowcheck.async_exec.machine import make_async_machine, replay_setup
from cowcheck.async_exec.ops import ASYNC_OPS
from cowcheck.async_exec.walks import walk
from cowcheck.core.impls import Implementation, probe_by_harness
from cowcheck.core.machine import MachineKind, register_machine
from cowcheck.reference.async_execution import AsyncExecutionController

__all__ = ["ASYNC", "AsyncHarness", "AsyncMachineConfig", "make_async_machine"]

ASYNC = MachineKind(
    name="async",
    summary="the FLIP-424 async execution controller",
    operations=ASYNC_OPS,
    harness_class=AsyncHarness,
    builder=make_async_machine,
    config_class=AsyncMachineConfig,
    replay_setup=replay_setup,
    builtins={"reference": lambda: Implementation("reference", AsyncExecutionController, True,
                                                  "reference async execution controller")},
    probe=probe_by_harness,
    scenarios=ASYNC_SCENARIOS,
    walker=walk,
    recorded_settings=("epoch_mode",),
    deterministic=lambda config: not config.threaded,  # a worker thread completes batches in its own time
)
register_machine(ASYNC)
