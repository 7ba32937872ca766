"""A whole map program in one Java call (``Batch.java``), observed as ``properties.map.parity`` observes.

Operations are numbered by their order in the map's table
(:data:`~properties.map.ops.MAP_OPS`; ``Batch.java`` declares the same
codes, and a test holds the two to each other), and each argument is encoded
by its domain (``Domain.encode``): keys and namespaces as indexes into a
table of Java objects, states as their length and ints, snapshot ids,
counts and choices as ints.
"""

from __future__ import annotations

from typing import Callable

from properties.core.program import Step
from properties.flink.convert import answer, java_value
from properties.flink.jvm import Java, jvm
from properties.map.ops import MAP_OPS

__all__ = ["BATCH_OPS", "DETAILS", "run_batch", "encode_program", "key_table"]

# op code = position in the map's table; the table's batch operations come first (a test holds that)
BATCH_OPS = tuple(op.name for op in MAP_OPS if op.batch)
_OP_CODE = {op: i for i, op in enumerate(BATCH_OPS)}
DETAILS = {"results": 0, "summary": 1, "final": 2, "every_step": 3}  # Batch.DETAIL_*


def key_table() -> tuple[list, Callable]:
    """``(table, ref)``: ``ref(value)`` numbers keys and namespaces into ``table``
    (by type and value: 1 and True are different Java objects)."""
    table: list = []
    index: dict = {}

    def ref(value) -> int:
        cache_key = (type(value), value)
        i = index.get(cache_key)
        if i is None:
            i = index[cache_key] = len(table)
            table.append(value)
        return i

    return table, ref


def encode_program(steps: list[Step]) -> tuple[list[int], list]:
    """Steps as Batch.java's op codes and argument ints; keys and namespaces as
    indexes into a table of values (turned into Java objects by the caller)."""
    table, ref = key_table()

    out: list[int] = []
    for step in steps:
        code = _OP_CODE.get(step.op)
        if code is None:
            raise ValueError(f"run_batch: unknown operation {step.op!r}")
        out.append(code)
        at = 0
        for domain in MAP_OPS[step.op].domains:
            values = step.args[at: at + domain.arity]
            problem = domain.check(values)
            if problem:
                raise ValueError(f"run_batch: {step.op}: {problem}")
            out += domain.encode(values, ref)
            at += domain.arity
    return out, table


def run_batch(steps: list[Step], detail: str = "final") -> list:
    """Run a whole program on a fresh Flink map inside Java, in one call.

    Returns ``[per-step observations, final digest or None]`` exactly as
    ``properties.map.parity.observe`` computes them for any white-box map (so the
    reference's observations equal Flink's iff they behave the same).
    ``detail``: ``results``, ``summary``, ``final`` or ``every_step``
    (see ``observe``).
    """
    if detail not in DETAILS:
        raise ValueError(f"run_batch: detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    jvm()
    program, table = encode_program(steps)
    keys = Java.object_array([java_value(v) for v in table])
    return answer(Java.Batch.run(Java.int_array(program), keys, DETAILS[detail]))
