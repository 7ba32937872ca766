"""The checkpoint machine's operations, declared once (:data:`CHECKPOINT_OPS`).

Keyed operations on two list states (``a``: list<int>, ``b``: list<long>)
interleaved with the life of checkpoints: start (synchronous part), write
one key group, complete, cancel, fail (an injected write error), and
restores of completed checkpoints. Checkpoints are named by ``cid`` (the
program's n-th checkpoint): ``running`` ones (started, not yet completed,
cancelled or failed) and ``completed`` ones, the two pools of ids. The
harness applies operation ``NAME`` with its method ``_op_NAME``; rendering,
reading from files (every argument has a check: a file's step holds what the
machine could have generated, as the serializers can write it), the
shrinker's simplifications and the Hypothesis rules (``domains``: drawn per
kind by ``cowcheck.checkpoint.machine``) come from here.

>>> from cowcheck.core.program import Step
>>> CHECKPOINT_OPS.render(Step("cancel", (0,)))
'c0.cancel()'
"""

from __future__ import annotations

from cowcheck.core.checks import INT32, INT64, arguments, int_in, list_of, one_of
from cowcheck.core.program import Domain, Operation, OperationTable
from cowcheck.reference.checkpoint import DEFAULT_MEMORY_THRESHOLD, MAX_MEMORY_THRESHOLD

__all__ = ["CHECKPOINT_OPS", "KEYED", "STATE_NAMES"]

KEYED = frozenset({"kv_put", "kv_get", "kv_get_mutate", "kv_remove", "kv_transform"})
STATE_NAMES = ("a", "b")  # the harness's STATES: a is list<int>, b is list<long>

# What a file's arguments may be: keys and namespaces are ints (IntSerializer), values fit their
# state's element serializer, ids and counts stay within what a program can use.
_STATE = one_of(*STATE_NAMES)
_INT = int_in(*INT32)
_CID = int_in(0, 1_000_000)
_GROUP = int_in(0, 1 << 15)  # Flink's largest max parallelism
_MAX_VALUES = 1000


def _keyed_check(value=None):
    """State, key and namespace; and the value, checked by ``value(state)``, if given."""
    def check(args: tuple):
        problem = arguments(_STATE, _INT, _INT)(args[:3])
        if problem is None and value is not None:
            problem = value(args[0])(args[3])
            problem = problem and f"argument 4: {problem}"
        return problem
    return check


def _element(state) -> tuple[int, int]:
    return INT32 if state == "a" else INT64


def _element_check(state):
    return int_in(*_element(state))


def _values_check(state):
    return list_of(int_in(*_element(state)), _MAX_VALUES)


def _restore_check(args: tuple) -> str | None:
    problem = arguments(_CID, _GROUP, _GROUP)(args)
    if problem is None and args[1] > args[2]:
        return f"the key-group range [{args[1]}, {args[2]}] is empty"
    return problem


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


# Argument domains (what the machine draws: cowcheck.checkpoint.machine). Checks and simplifications
# are the operations' own: a value's check depends on the state it goes to.
AT = Domain("at", 3)  # state, key, namespace
VALUES = Domain("values")  # a state's new content
VALUE = Domain("value")  # an element appended or transformed in
THRESHOLD = Domain("threshold")  # the streams' memory threshold
NEW_CID = Domain("cid", ids="new", pool="running")
RUNNING = Domain("cid", ids="live", pool="running")
ENDED = Domain("cid", ids="taken", pool="running")  # the step completes, cancels or fails it
COMPLETED = Domain("cid", ids="live", pool="completed")
GROUPS = Domain("groups", 2)  # a key-group range: start, end
PARTS = Domain("parts")

CHECKPOINT_OPS = OperationTable("checkpoint", [
    Operation(name="kv_put", args=("state", "key", "namespace", "value"),
              template="backend.state({0!r}).put({1!r}, {2!r}, {3!r})", simplify=_keyed(_empty_list),
              check=_keyed_check(_values_check), domains=(AT, VALUES), rule="put"),
    Operation(name="kv_get", args=("state", "key", "namespace"), template="backend.state({0!r}).get({1!r}, {2!r})",
              simplify=_keyed(), check=_keyed_check(), domains=(AT,), rule="get"),
    Operation(name="kv_get_mutate", args=("state", "key", "namespace", "value"),
              template="v = backend.state({0!r}).get({1!r}, {2!r}); v is not None and v.append({3!r})"
                       "  # mutate in place", simplify=_keyed(_zero), check=_keyed_check(_element_check),
              domains=(AT, VALUE), rule="get_then_mutate_in_place"),
    Operation(name="kv_remove", args=("state", "key", "namespace"),
              template="backend.state({0!r}).remove({1!r}, {2!r})", simplify=_keyed(), check=_keyed_check(),
              domains=(AT,), rule="remove"),
    Operation(name="kv_transform", args=("state", "key", "namespace", "value"),
              template="backend.state({0!r}).transform({1!r}, {2!r}, {3!r}, transform_append)",
              simplify=_keyed(_zero), check=_keyed_check(_element_check), domains=(AT, VALUE), rule="transform"),
    Operation(name="checkpoint", args=("cid", "threshold"),
              template="c{0} = backend.checkpoint({0}, CheckpointStreamFactory(directory, threshold={1!r}))",
              simplify=_default_threshold, check=arguments(_CID, int_in(0, MAX_MEMORY_THRESHOLD)),
              domains=(NEW_CID, THRESHOLD), rule="start_checkpoint"),
    # The asynchronous part often writes several key groups between two operations of the task
    # thread: a rule writes 1-4 in a row.
    Operation(name="write_key_group", args=("cid",), template="c{0}.advance()  # write one key group",
              check=arguments(_CID), domains=(RUNNING,), repeat=(1, 4), rule="write_key_groups"),
    Operation(name="complete", args=("cid",), template="h{0} = c{0}.complete(); check_restore(h{0})",
              check=arguments(_CID), domains=(ENDED,), joins="completed"),
    Operation(name="cancel", args=("cid",), template="c{0}.cancel()", check=arguments(_CID), domains=(ENDED,)),
    Operation(name="fail", args=("cid",), template="fail_next_write(c{0}); c{0}.complete()  # raises InjectedWriteFailure",
              check=arguments(_CID), domains=(ENDED,), rule="fail_write"),
    Operation(name="restore", args=("cid", "start", "end"), template="check_restore(h{0}, KeyGroupRange({1}, {2}))",
              check=_restore_check, domains=(COMPLETED, GROUPS)),
    Operation(name="rescale", args=("cid", "parts"),
              template="check_rescale(h{0}, parts={1})  # split, checkpoint each part, merge", simplify=_two_parts,
              check=arguments(_CID, int_in(1, 128)), domains=(COMPLETED, PARTS)),
    Operation(name="recover", args=("cid",),
              template="backend = type(backend).restore([h{0}])  # cancel running checkpoints, go on",
              check=arguments(_CID), domains=(COMPLETED,)),
])
