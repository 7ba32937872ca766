"""The operator machine ("operator"): list, union list and broadcast states, checkpoints, rescaling, compression.

- ``ops``: the ten states (list and union list states of ints, longs, strings and
  lists; broadcast maps) and the operations, declared once;
- ``harness``: drives a job of operator state backends against
  :mod:`cowcheck.model.operator_model`, checks O1–O7;
- ``machine``: the Hypothesis machine, its rules generated from the table;
- ``walks``: seeded swarm walks; ``mutants``: seeded bugs of the reference backend.

Importing this package registers the machine (and its mutants) with
:mod:`cowcheck.core.machine`; ``--impl flink[@VERSION]`` runs Flink's own
``DefaultOperatorStateBackend`` (``cowcheck.flink.operator``).
"""

from __future__ import annotations

from cowcheck.core.impls import Implementation, probe_by_harness
from cowcheck.core.machine import MachineKind, register_machine
from cowcheck.operator import mutants  # noqa: F401  (registers the operator's seeded bugs)
from cowcheck.operator.harness import OPERATOR_FINDINGS, OPERATOR_SCENARIOS, OperatorHarness, OperatorMachineConfig
from cowcheck.operator.machine import make_operator_machine, replay_setup
from cowcheck.operator.ops import OPERATOR_OPS
from cowcheck.operator.walks import walk
from cowcheck.reference.operator import OperatorStateBackends

__all__ = ["OPERATOR", "OperatorHarness", "OperatorMachineConfig", "make_operator_machine",
           "reference_operator_backends"]


def reference_operator_backends() -> OperatorStateBackends:
    """The reference's operator state backends (Flink 2.3.0's behaviour)."""
    return OperatorStateBackends()


def setup_lines(impl_spec: str, config: OperatorMachineConfig) -> list:
    where = "on the task thread" if config.async_part == "inline" else "on the task thread or threads of their own"
    compressed = "" if config.compression else "; no snapshot compression (the release has none for operator state)"
    return [f"# implementation: {impl_spec}; asynchronous parts {where}{compressed} (docs/contract.md, Operator state)",
            "# open_job(p): p operator state backends, each with the ten states of cowcheck.operator.ops.STATES;",
            "# checkpoint / check_restore / recover: every instance, repartitioned as Flink's round-robin does"]


OPERATOR = register_machine(MachineKind(
    name="operator",
    summary="operator state: list, union list and broadcast states, checkpoints, rescaling, compression",
    operations=OPERATOR_OPS,
    harness_class=OperatorHarness,
    builder=make_operator_machine,
    config_class=OperatorMachineConfig,
    replay_setup=replay_setup,
    builtins={"reference": lambda: Implementation("reference", reference_operator_backends, False,
                                                  "reference operator state backend (DefaultOperatorStateBackend)")},
    probe=probe_by_harness,
    scenarios=OPERATOR_SCENARIOS,
    findings=OPERATOR_FINDINGS,
    setup_lines=setup_lines,
    walker=walk,
    walker_takes_config=True,
    recorded_settings=("async_part", "compression"),
    deterministic=lambda config: config.async_part == "inline",  # checkpoints' own threads race the steps
    out_of_reach=lambda config: frozenset() if config.compression else frozenset({"compression-on"}),
    api=("create_operator_state_backend", "repartition"),
    sample=lambda factory: factory(),
))
