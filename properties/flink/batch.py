"""The batched encoding: map programs as the ints ``Walk.java`` reads, keys and namespaces as a table.

Batched walks (:mod:`cowcheck.flink.segments`) and parity programs send their
steps to the Java helper in this encoding: an operation's code is its
position in the map's table (:data:`~cowcheck.map.ops.MAP_OPS`; the Java
side's ``Ops.java`` is generated from the same table, :mod:`cowcheck.flink.opcodes`),
and each argument is encoded by its domain (``MapDomain.encode``, read back in
Java by ``Domain.wire``): keys and namespaces as indexes into a table of values
(``Java.object_array`` of :func:`~cowcheck.flink.convert.java_template`
objects: the Java side hands the map a new copy per use, one object per value
after ``hold_keys``), states as their length and ints, snapshot ids, counts,
key families (their position in :data:`~cowcheck.core.keys.FAMILIES`) and
choices as ints. Bulk steps carry their family, first index and count: Java
computes the keys (``Keys.nth``, held equal to :func:`~cowcheck.core.keys.nth_key`
by a test).

>>> encode([Step("put", ("a", 0, [7, 8])), Step("get", ("a", 0))])
([0, 0, 1, 2, 7, 8, 2, 0, 1], ['a', 0])
"""

from __future__ import annotations

from typing import Callable

from cowcheck.flink.convert import java_template
from cowcheck.core.program import Step  # noqa: F401  (the examples above)
from cowcheck.flink.jvm import Java
from cowcheck.map.ops import MAP_OPS

__all__ = ["OP_CODES", "encode", "key_table", "java_keys"]

OP_CODES = {op.name: i for i, op in enumerate(MAP_OPS)}  # op code = position in the map's table (Ops.java)
_DOMAINS = {op.name: tuple(op.domains) for op in MAP_OPS}


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


def encode(steps, check: bool = False) -> tuple[list[int], list]:
    """Steps as op codes and argument ints; keys and namespaces as indexes into a table of
    values, returned with them. ``check``: check each argument against its domain first
    (a ValueError naming the problem)."""
    table, ref = key_table()
    out: list[int] = []
    append, extend = out.append, out.extend
    for step in steps:
        op = step.op
        code = OP_CODES.get(op)
        if code is None:
            raise ValueError(f"batched encoding: unknown operation {op!r}")
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
                    raise ValueError(f"{op}: {problem}")
            extend(domain.encode(values, ref))
            at += domain.arity
    return out, table


def java_keys(table: list):
    """The key table as the Java array the helper reads."""
    return Java.object_array([java_template(v) for v in table])
