"""The operator machine for Hypothesis: one rule per operation of the table, generated from it.

``open`` is the machine's initialize rule (the parallelism); every other
operation of :data:`~cowcheck.operator.ops.OPERATOR_OPS` becomes a rule whose
arguments are drawn from their domains (:data:`STRATEGIES`). Instances are
drawn as indexes and resolved against the job's parallelism of the moment (a
recovery changes it); checkpoint ids flow through two bundles, as in the
backend machine: ``checkpoint`` (and ``savepoint``) makes a completed one,
``checkpoint_async`` (and ``savepoint_async``) a running one that ``join`` consumes (restores name any started one).

>>> from hypothesis import settings
>>> from hypothesis.stateful import run_state_machine_as_test
>>> from cowcheck.reference.operator import OperatorStateBackends
>>> Machine = make_operator_machine(OperatorStateBackends)
>>> run_state_machine_as_test(Machine, settings=settings(max_examples=2, stateful_step_count=10, database=None))
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, initialize, rule

from cowcheck.core.machine import HarnessMachine, RunRecord, identify
from cowcheck.operator.harness import OperatorHarness, OperatorMachineConfig
from cowcheck.operator.ops import (BROADCAST_STATES, LIST_STATES, MAX_PARALLELISM, MUTABLE_STATES, OPERATOR_OPS,
                                   STATES, TARGETS)

__all__ = ["make_operator_machine", "replay_setup", "STRATEGIES"]

_CODE = st.integers(-2, 9)
_CODES = st.none() | st.lists(st.integers(-1, 9), max_size=4)
STRATEGIES = {
    "parallelism": st.integers(1, MAX_PARALLELISM),
    "instance": st.integers(0, 1 << 16),  # resolved modulo the parallelism of the moment
    "list_state": st.sampled_from(LIST_STATES),
    "broadcast_state": st.sampled_from(BROADCAST_STATES),
    "state": st.sampled_from([s.name for s in STATES]),
    "mutable_state": st.sampled_from(MUTABLE_STATES),
    "code": _CODE,
    "codes": _CODES,
    "pairs": st.none() | st.lists(st.lists(st.integers(-1, 9), min_size=2, max_size=2), max_size=3),
    "where": st.integers(0, 9),
    "compressed": st.booleans(),
    "target": st.sampled_from((*(TARGETS[:1] * 4), *TARGETS[1:])),  # files a fifth of the time (fsync: slow)
    "seed": st.integers(0, (1 << 31) - 1),
    "reregister": st.sampled_from(["", "", "", *(s.name for s in STATES)]),
}
_RUNNING, _STARTED = Bundle("running"), Bundle("started")
_CIDS = {"checkpoint": (None, (_STARTED,)), "checkpoint_async": (None, (_RUNNING, _STARTED)),
         "savepoint": (None, (_STARTED,)), "savepoint_async": (None, (_RUNNING, _STARTED)),
         "join": (consumes(_RUNNING), ()), "restore": (_STARTED, ()), "recover": (_STARTED, ())}


def _make_rule(op, compression: bool = True):
    strategies = STRATEGIES if compression else {**STRATEGIES, "compressed": st.just(False)}
    drawn = {arg: strategies[domain] for arg, domain in zip(op.args, op.domains) if domain != "cid"}
    source, targets = _CIDS.get(op.name, (None, ()))
    if source is not None:
        drawn["cid"] = source

    def apply_op(self, **values):
        if "cid" in op.args and source is None:
            values["cid"] = self.next_cid
            self.next_cid += 1
        args = [values[arg] % len(self.harness.backends) if domain == "instance" else values[arg]
                for arg, domain in zip(op.args, op.domains)]
        self.apply(op.name, *args)
        return args[0] if targets else None

    apply_op.__name__ = op.name
    return rule(targets=targets, **drawn)(apply_op) if targets else rule(**drawn)(apply_op)


def make_operator_machine(factory: Callable, config: OperatorMachineConfig = OperatorMachineConfig(),
                          record: RunRecord | None = None) -> type:
    """A machine class testing the operator state backends ``factory()`` builds."""
    record = record if record is not None else RunRecord()

    class OperatorMachine(HarnessMachine):
        running = _RUNNING
        started = _STARTED

        def __init__(self) -> None:
            super().__init__()
            self.attach(OperatorHarness(self.construct(factory), async_part=config.async_part,
                                        compression=config.compression))
            self.next_cid = 0

        @initialize(parallelism=st.integers(1, 4))
        def open(self, parallelism):
            self.apply("open", parallelism)

        def teardown(self) -> None:
            try:
                if self.harness.failure is None:
                    for cid in list(self.harness.futures):
                        self.apply("join", cid)
                    record.coverage.update(self.harness.coverage)
                    record.findings.update(self.harness.findings)
            finally:
                self.harness.close()

    for op in OPERATOR_OPS:
        if op.name != "open":
            setattr(OperatorMachine, op.name, _make_rule(op, config.compression))
    name = getattr(factory, "__name__", None) or type(factory).__name__
    OperatorMachine.__name__ = OperatorMachine.__qualname__ = f"OperatorMachine[{name}]"
    OperatorMachine.record = record
    return identify(OperatorMachine, "operator", factory, config)


def replay_setup(factory: Callable, config: OperatorMachineConfig):
    """How the operator harness replays a program: a fresh factory per run."""
    return factory, {"async_part": config.async_part, "compression": config.compression}
