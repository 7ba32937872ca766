"""A whole map program in one Java call (``Batch.java``), observed as ``properties.map.parity`` observes.

The batched encoding, shared with batched walks (``properties.flink.walk``,
``Walk.java``): an operation's code is its position in the map's table
(:data:`~properties.map.ops.MAP_OPS`; batch operations come first, so a batch
and a walk number them alike; ``Ops.java`` declares the same codes and a test
holds the two to each other), and each argument is encoded by its domain
(``Domain.encode``): keys and namespaces as indexes into a table of values
(``Java.object_array`` of :func:`~properties.flink.convert.java_template`
objects: the Java side hands the map a new copy per use, one object per value
after ``hold_keys``), states as their length and ints, snapshot ids, counts,
key families (their position in :data:`~properties.core.keys.FAMILIES`) and
choices as ints. Bulk steps carry their family, first index and count: Java
computes the keys (``Keys.nth``, held equal to :func:`~properties.core.keys.nth_key`
by a test).
"""

from __future__ import annotations

from typing import Callable

from properties.core.program import Step
from properties.flink.convert import answer, java_template
from properties.flink.jvm import Java, jvm
from properties.map.ops import MAP_OPS

__all__ = ["BATCH_OPS", "OP_CODES", "DETAILS", "run_batch", "encode", "encode_program", "key_table",
           "java_keys"]

# op code = position in the map's table; the table's batch operations come first (a test holds that)
OP_CODES = {op.name: i for i, op in enumerate(MAP_OPS)}
BATCH_OPS = tuple(op.name for op in MAP_OPS if op.batch)
_DOMAINS = {op.name: tuple(op.domains) for op in MAP_OPS}
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


def encode(steps, allowed: frozenset | None = None, check: bool = False) -> tuple[list[int], list]:
    """Steps as op codes and argument ints (``Ops.java``); keys and namespaces as indexes into a
    table of values, returned with them. ``allowed``: the operations the receiver runs (a
    ValueError for another); ``check``: check each argument against its domain first."""
    table, ref = key_table()
    out: list[int] = []
    append, extend = out.append, out.extend
    for step in steps:
        op = step.op
        code = OP_CODES.get(op)
        if code is None or (allowed is not None and op not in allowed):
            raise ValueError(f"run_batch: unknown operation {op!r}")
        append(code)
        domains = _DOMAINS[op]
        args = step.args
        if len(domains) == 1 and domains[0].arity == 1 and not check:  # most operations: one plain argument
            extend(domains[0].encode(args, ref))
            continue
        at = 0
        for domain in domains:
            values = args[at: at + domain.arity]
            if check:
                problem = domain.check(values)
                if problem:
                    raise ValueError(f"run_batch: {op}: {problem}")
            extend(domain.encode(values, ref))
            at += domain.arity
    return out, table


_BATCH = frozenset(BATCH_OPS)


def encode_program(steps: list[Step]) -> tuple[list[int], list]:
    """A parity program as Batch.java's codes and argument ints, arguments checked; and its key table."""
    return encode(steps, _BATCH, check=True)


def java_keys(table: list):
    """The key table as the Java array the helper reads."""
    return Java.object_array([java_template(v) for v in table])


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
    return answer(Java.Batch.run(Java.int_array(program), java_keys(table), DETAILS[detail]))
