"""The table machine's operations, declared once (:data:`TABLE_OPS`).

A ``CopyOnWriteStateTable`` (every key group of max parallelism 128) whose
state is first registered with a serializer that declares values immutable
(its copy returns the same object), then re-registered with a copying one
(``set_meta_info``: schema evolution on restore). Keyed puts and reads,
in-place mutation of a returned state (only once the copying serializer is
registered: before, values are declared immutable and mutating one breaks
that contract), snapshots, reads of snapshots, releases. The Hypothesis rules
come from here (``domains``, drawn per kind by ``cowcheck.table.machine``;
``requires``: what the program must have done first).

>>> from cowcheck.core.program import Step
>>> TABLE_OPS.render(Step("set_meta_info", ()))
't.set_meta_info()  # re-register the state with a copying serializer'
"""

from __future__ import annotations

from cowcheck.core.checks import INT32, arguments, int_in, list_of
from cowcheck.core.program import Domain, Operation, OperationTable

__all__ = ["TABLE_OPS", "key_groups_written"]


def key_groups_written(snapshot, max_parallelism: int = 128) -> dict:
    """What a checkpoint of ``snapshot`` holds: key group -> the entries its
    ``write_key_group`` bytes decode to (Flink's serializers), for the groups that
    hold any. Writing releases each key group's snapshot, as in Flink."""
    import io

    from cowcheck.core.states import decode_written, write_serializers

    out = {}
    for group in range(max_parallelism):
        data = io.BytesIO()
        snapshot.write_key_group(data, group, *write_serializers())
        found = decode_written(data.getvalue())[1]
        if found:
            out[group] = found
    return out


def _simpler_state(args: tuple):
    key, namespace, state = args
    if state:
        yield (key, namespace, [])
    if key:
        yield (0, namespace, state)


def _simpler_pair(args: tuple):
    key, namespace = args[:2]
    rest = args[2:]
    if key:
        yield (0, namespace, *rest)
    if namespace:
        yield (key, 0, *rest)


# What a file's arguments may be: ints the serializers write (keys, namespaces and states' elements
# are Java ints), short states, snapshot ids a program can use (valid_program checks their order).
_INT = int_in(*INT32)
_STATE = list_of(_INT, 1000)
_SID = arguments(int_in(0, 1_000_000))

KEY, NAMESPACE, STATE, VALUE = Domain("key"), Domain("namespace"), Domain("state"), Domain("value")
NEW_SID = Domain("sid", ids="new", pool="snapshots")
LIVE_SID = Domain("sid", ids="live", pool="snapshots")
RELEASED_SID = Domain("sid", ids="taken", pool="snapshots")  # the step releases the snapshot


def _copying(harness) -> bool:
    """Whether the copying serializer is registered (values are declared immutable until then)."""
    return harness.copying


TABLE_OPS = OperationTable("table", [
    Operation(name="put", args=("key", "namespace", "state"), template="t.put({0!r}, {1!r}, {2!r})",
              simplify=_simpler_state, check=arguments(_INT, _INT, _STATE), domains=(KEY, NAMESPACE, STATE)),
    Operation(name="get", args=("key", "namespace"), template="t.get({0!r}, {1!r})", simplify=_simpler_pair,
              check=arguments(_INT, _INT), domains=(KEY, NAMESPACE)),
    Operation(name="get_mutate", args=("key", "namespace", "value"),
              template="v = t.get({0!r}, {1!r}); v is not None and v.append({2!r})  # mutate in place",
              simplify=_simpler_pair, check=arguments(_INT, _INT, _INT), domains=(KEY, NAMESPACE, VALUE),
              requires=_copying),
    Operation(name="set_meta_info", args=(), template="t.set_meta_info()  # re-register the state with a copying "
                                                      "serializer", requires=lambda harness: not _copying(harness)),
    Operation(name="snapshot", args=("sid",), template="s{0} = t.snapshot()", check=_SID, domains=(NEW_SID,)),
    Operation(name="read_snapshot", args=("sid",), template="list(s{0})", check=_SID, domains=(LIVE_SID,)),
    Operation(name="release", args=("sid",), template="s{0}.release()", check=_SID, domains=(RELEASED_SID,)),
    Operation(name="write_snapshot", args=("sid",),
              template="key_groups_written(s{0})  # writeStateInKeyGroup for key groups 0-127, as a checkpoint does",
              check=_SID, domains=(RELEASED_SID,)),
])
