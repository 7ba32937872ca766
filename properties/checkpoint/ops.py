"""The checkpoint machine's operations, declared once (:data:`CHECKPOINT_OPS`).

Keyed operations on two list states (``a``: list<int>, ``b``: list<long>)
interleaved with the life of checkpoints: start (synchronous part), write
one key group, complete, cancel, fail (an injected write error), and
restores of completed checkpoints. Checkpoints are named by ``cid`` (the
program's n-th checkpoint). The harness applies operation ``NAME`` with its
method ``_op_NAME``; rendering, reading from files and the shrinker's
simplifications come from here.

>>> from properties.core.program import Step
>>> CHECKPOINT_OPS.render(Step("cancel", (0,)))
'c0.cancel()'
"""

from __future__ import annotations

from properties.core.program import Operation, OperationTable
from reference.checkpoint import DEFAULT_MEMORY_THRESHOLD

__all__ = ["CHECKPOINT_OPS", "KEYED"]

KEYED = frozenset({"kv_put", "kv_get", "kv_get_mutate", "kv_remove", "kv_transform"})


def _keyed(*more):
    """Simplifications of a keyed step: namespace 0 first, then ``more`` (on the last argument)."""
    def simplify(args: tuple):
        if args[2] != 0:
            yield (args[0], args[1], 0) + tuple(args[3:])
        for simpler in more:
            value = simpler(args[3])
            if value is not None:
                yield args[:3] + (value,)
    return simplify


def _empty_list(value):
    return [] if value else None


def _zero(value):
    return 0 if value != 0 else None


def _default_threshold(args: tuple):
    if args[1] != DEFAULT_MEMORY_THRESHOLD:
        yield (args[0], DEFAULT_MEMORY_THRESHOLD)


def _two_parts(args: tuple):
    if args[1] > 2:
        yield (args[0], 2)


CHECKPOINT_OPS = OperationTable("checkpoint", [
    Operation(name="kv_put", args=("state", "key", "namespace", "value"),
              template="backend.state({0!r}).put({1!r}, {2!r}, {3!r})", simplify=_keyed(_empty_list)),
    Operation(name="kv_get", args=("state", "key", "namespace"), template="backend.state({0!r}).get({1!r}, {2!r})",
              simplify=_keyed()),
    Operation(name="kv_get_mutate", args=("state", "key", "namespace", "value"),
              template="v = backend.state({0!r}).get({1!r}, {2!r}); v is not None and v.append({3!r})"
                       "  # mutate in place", simplify=_keyed(_zero)),
    Operation(name="kv_remove", args=("state", "key", "namespace"),
              template="backend.state({0!r}).remove({1!r}, {2!r})", simplify=_keyed()),
    Operation(name="kv_transform", args=("state", "key", "namespace", "value"),
              template="backend.state({0!r}).transform({1!r}, {2!r}, {3!r}, transform_append)",
              simplify=_keyed(_zero)),
    Operation(name="checkpoint", args=("cid", "threshold"),
              template="c{0} = backend.checkpoint({0}, CheckpointStreamFactory(directory, threshold={1!r}))",
              simplify=_default_threshold),
    Operation(name="write_key_group", args=("cid",), template="c{0}.advance()  # write one key group"),
    Operation(name="complete", args=("cid",), template="h{0} = c{0}.complete(); check_restore(h{0})"),
    Operation(name="cancel", args=("cid",), template="c{0}.cancel()"),
    Operation(name="fail", args=("cid",), template="fail_next_write(c{0}); c{0}.complete()  # raises InjectedWriteFailure"),
    Operation(name="restore", args=("cid", "start", "end"), template="check_restore(h{0}, KeyGroupRange({1}, {2}))"),
    Operation(name="rescale", args=("cid", "parts"),
              template="check_rescale(h{0}, parts={1})  # split, checkpoint each part, merge", simplify=_two_parts),
    Operation(name="recover", args=("cid",),
              template="backend = type(backend).restore([h{0}])  # cancel running checkpoints, go on"),
])
