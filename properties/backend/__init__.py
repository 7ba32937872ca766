"""The backend machine ("backend"): keyed states at the state level, TTL, checkpoints and restores.

- ``ops``: the states (value, list, map, reducing; without TTL, with TTL on
  create and write, on read and write; of a POJO and a Kryo type: ``values``) and the operations,
  declared once;
- ``harness``: drives a state backend against :mod:`cowcheck.model.keyed_model`, checks K1–K10
  (savepoints, file thresholds: ``savepoints``; typed values, upgrades: ``upgrades``);
- ``machine``: the Hypothesis machine, its rules generated from the table;
- ``walks``: seeded swarm walks; ``mutants``, ``savepoint_mutants``: seeded bugs of the reference backend.

Importing this package registers the machine (and its mutants) with
:mod:`cowcheck.core.machine`; ``--impl flink[@VERSION]`` runs Flink's own
``HeapKeyedStateBackend`` (``cowcheck.flink.backend``).
"""

from __future__ import annotations

from cowcheck.backend import mutants  # noqa: F401  (registers the backend's seeded bugs)
from cowcheck.backend import savepoint_mutants  # noqa: F401  (and those of savepoints, upgrades and streams)
from cowcheck.backend.harness import BACKEND_SCENARIOS, BackendHarness, BackendMachineConfig
from cowcheck.backend.machine import make_backend_machine, replay_setup
from cowcheck.backend.ops import BACKEND_OPS
from cowcheck.backend.walks import walk
from cowcheck.core.impls import Implementation, probe_by_harness
from cowcheck.core.machine import MachineKind, register_machine
from cowcheck.reference.keyed import HashMapStateBackend

__all__ = ["BACKEND", "BackendHarness", "BackendMachineConfig", "make_backend_machine", "reference_state_backend",
           "reference_flink_format_backend"]


def reference_state_backend() -> HashMapStateBackend:
    """The reference state backend with maps of capacity 4 (Flink's have 128): its tables rehash
    within a few entries, and snapshots and key iteration stay cheap."""
    return HashMapStateBackend(capacity=4)


def reference_flink_format_backend() -> HashMapStateBackend:
    """The same, its checkpoints written in Flink's format (reference/checkpoint/flink_format/), which
    real Flink restores: ``--impl reference-flink-format``."""
    return HashMapStateBackend(capacity=4, checkpoint_format="flink")


def setup_lines(impl_spec: str, config: BackendMachineConfig) -> list:
    """What the printed steps stand for (the harness's helpers, properties/backend/harness.py)."""
    where = "on the task thread" if config.async_part == "inline" else "on the task thread or a thread of its own"
    return [f"# implementation: {impl_spec}; asynchronous parts {where} (docs/contract.md §20)",
            "# open_backend: create_keyed_state_backend over all key groups, every state of ops.STATES registered;",
            "# at(key, namespace, state): set_current_key(key), the state's set_current_namespace(namespace);",
            "# check_restore / check_rescale: restore, compare with the model's copy frozen at the checkpoint"]


BACKEND = register_machine(MachineKind(
    name="backend",
    summary="the heap keyed backend at the state level: descriptors, TTL, checkpoints, restores",
    operations=BACKEND_OPS,
    harness_class=BackendHarness,
    builder=make_backend_machine,
    config_class=BackendMachineConfig,
    replay_setup=replay_setup,
    builtins={"reference": lambda: Implementation("reference", reference_state_backend, False,
                                                  "reference heap keyed state backend (HashMapStateBackend)"),
              "reference-flink-format": lambda: Implementation(
                  "reference-flink-format", reference_flink_format_backend, False,
                  "reference heap keyed state backend, checkpoints in Flink's format")},
    probe=probe_by_harness,
    scenarios=BACKEND_SCENARIOS,
    setup_lines=setup_lines,
    walker=walk,
    walker_takes_config=True,
    recorded_settings=("async_part",),
    deterministic=lambda config: config.async_part == "inline",  # a checkpoint's own thread races the steps
    out_of_reach=lambda config: frozenset(
        ({"savepoint-native"} if not config.native_savepoints else set())
        | ({"ttl-switch-refused"} if config.ttl_migration else {"ttl-switched-on", "ttl-switched-off"})),
    api=("create_keyed_state_backend",),
    sample=lambda factory: factory(),
))
