"""The Java helper's operation codes, generated from the map's table when the helper is compiled.

``Ops.java`` is not written by hand: :func:`ops_java` renders it from
:data:`~cowcheck.map.ops.MAP_OPS` (an operation's code is its position in
the table), and :mod:`cowcheck.flink.jvm` compiles it with the hand-written
sources, its text part of the cache key. So Java's ``switch`` labels are
compile-time constants that cannot drift from the table: a new operation gets
its code, its name, whether it is keyed, and how ``Walk.java`` decodes its
arguments (:attr:`~cowcheck.map.ops.Domain.wire`, one letter per encoded
value: ``k`` a key or namespace index, ``s`` a state as its length and
elements, ``i`` an int) from its record. Its application is the one ``case``
of ``Walk.execute`` (``tests/test_flink_bridge.py`` fails while one is missing).

>>> "static final int PUT = 0;" in ops_java()
True
>>> arguments(MAP_OPS["put"])
'kks'
"""

from __future__ import annotations

import re

from cowcheck.map.ops import MAP_OPS, MapOperation

__all__ = ["OPS_JAVA", "ops_java", "arguments", "constant"]

OPS_JAVA = "cowcheck/bridge/Ops.java"  # where the generated source goes, relative to the source root


def constant(name: str) -> str:
    """The Java constant of operation ``name`` (``put_range`` -> ``PUT_RANGE``)."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"a map operation's name must be a snake_case identifier, got {name!r}")
    return name.upper()


def arguments(op: MapOperation) -> str:
    """How ``Walk.java`` decodes the operation's arguments: one letter per encoded value."""
    return "".join(domain.wire for domain in op.domains)


def _strings(values) -> str:
    return ", ".join(f'"{v}"' for v in values)


def ops_java(table=MAP_OPS) -> str:
    """The source of ``cowcheck.bridge.Ops`` for ``table``."""
    ops = list(table)
    constants = "\n".join(f"    static final int {constant(op.name)} = {i};" for i, op in enumerate(ops))
    keyed = ", ".join("true" if op.keyed else "false" for op in ops)
    return f"""package cowcheck.bridge;

/**
 * Operation codes of the batched encoding: an operation's position in cowcheck.map.ops.MAP_OPS.
 * Generated from that table by properties/flink/opcodes.py when the helper is compiled; not a
 * source file of the repository.
 */
final class Ops {{
    private Ops() {{}}

    static final String[] OPERATIONS = {{{_strings(op.name for op in ops)}}};

    /** Per operation, its encoded arguments in order: k a key or namespace index, s a state, i an int. */
    static final String[] ARGUMENTS = {{{_strings(arguments(op) for op in ops)}}};

    private static final boolean[] KEYED = {{{keyed}}};

{constants}

    /** Whether {{@code op}} is one of docs/contract.md section 4's keyed operations (one rehash step first). */
    static boolean keyed(int op) {{
        return KEYED[op];
    }}

    /** A copy of {{@link #OPERATIONS}} (for Python). */
    static String[] names() {{
        return OPERATIONS.clone();
    }}
}}
"""
