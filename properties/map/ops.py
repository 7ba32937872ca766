"""The map machine's operations, declared once (:data:`MAP_OPS`).

Every consumer of map programs reads this table: the harness applies
operation ``NAME`` with its method ``_op_NAME``; the Hypothesis machine makes
one rule per operation from the argument domains; seeded walks
(``properties.map.walks``) and parity programs (``properties.map.parity``)
draw arguments per domain; replay and counterexamples render and parse
steps with it; the shrinker simplifies arguments per domain; regression
tests render each step through the public API; the Flink bridge numbers
operations in this order and encodes arguments per domain (``Batch.java``
follows the same order). Adding an operation is a record here, a harness
method, and (for the bridge) its Java case.

An argument *domain* names a kind of value (a key-and-namespace pair, a
state, a snapshot id...). Where values come from is the business of a
*context* with one method per domain kind — Hypothesis strategies, a swarm
walk's random draws, a parity program's draws — so each consumer keeps its
own distribution while the table says what each operation takes.

>>> MAP_OPS.render(Step("put", (1, 0, [7])))
'm.put(1, 0, [7])'
>>> [op.name for op in MAP_OPS if op.keyed][:3]
['put', 'put_and_get_old', 'get']
"""

from __future__ import annotations

import io
from typing import Any, Callable, Iterable

import attrs

from properties.core.program import Operation, OperationTable, Step
from properties.core.states import decode_written, write_serializers

__all__ = ["Domain", "MapOperation", "MAP_OPS", "SNAPSHOT_TRANSFORMERS", "TRANSFORMER_NAMES", "visit_and_prune_even",
           "write_serializers", "decode_written", "written_entries",
           "render", "render_program", "draw_args", "PAIR", "STATE", "VALUE", "READS", "NEW_SNAPSHOT",
           "LIVE_SNAPSHOT", "RELEASED_SNAPSHOT", "TRANSFORMER", "POSITION", "CHANGE", "NAMESPACE", "MAX_EMPTY"]


# ------------------------------------------------------------ TTL helpers


def _drop_even_length(state):
    return None if isinstance(state, list) and len(state) % 2 == 0 else state


def _append_marker(state):
    return list(state) + [-1] if isinstance(state, list) else state


# TTL-style snapshot transformers, by name (replayable).
SNAPSHOT_TRANSFORMERS = {  # the bridge's Batch.java numbers them in this order
    "drop_even": _drop_even_length,
    "append_marker": _append_marker,
    "none": None,  # iterate(None): SPEC §15's default, every entry as it is
}
TRANSFORMER_NAMES = tuple(sorted(SNAPSHOT_TRANSFORMERS))


# ------------------------------------------------------- write_state


def written_entries(snapshot) -> list:
    """The entries ``snapshot.write_state`` writes, decoded (regression tests use it)."""
    out = io.BytesIO()
    snapshot.write_state(out, *write_serializers())
    return decode_written(out.getvalue())[1]


def visit_and_prune_even(m, max_empty: int) -> None:
    """TTL-style cleanup through the incremental visitor: remove states of even length."""
    visitor = m.incremental_visitor(max_empty)
    while visitor.has_next():
        for entry in visitor.next_entries():
            if isinstance(entry[2], list) and len(entry[2]) % 2 == 0:
                visitor.remove(entry)


# ---------------------------------------------------------------- domains

_INT32 = (-(1 << 31), (1 << 31) - 1)


@attrs.frozen
class Domain:
    """A kind of argument. ``kind`` names the method a context draws it with;
    ``arity`` is how many step arguments it fills (a pair fills two);
    ``check`` finds a problem with values read from a file; ``simpler``
    proposes simpler values (shrinking); ``encode(values, ref)`` gives the
    ints of the Flink bridge's batch encoding (``ref`` numbers keys and
    namespaces)."""

    kind: str
    arity: int = 1
    check: Callable[[tuple], str | None] = lambda values: None
    simpler: Callable[[tuple], Iterable[tuple]] = lambda values: ()
    encode: Callable[[tuple, Callable], list] = lambda values, ref: [values[0]]

    def draw(self, context) -> tuple:
        """Values drawn by ``context`` (a method per kind), as a tuple of ``arity``."""
        got = getattr(context, self.kind)()
        return got if self.arity > 1 else (got,)


def _int_in(lo: int, hi: int | None = None):
    def check(values):
        v = values[0]
        if type(v) is not int or v < lo or (hi is not None and v > hi):
            return f"expected an int {'>= ' + str(lo) if hi is None else f'in [{lo}, {hi}]'}, got {v!r:.40}"
        return None
    return check


def _state_check(values):
    state = values[0]
    return None if isinstance(state, list) else f"a state must be a list, got {state!r:.40}"


def _state_encode(values, ref):
    state = values[0]
    if any(type(x) is not int or not _INT32[0] <= x <= _INT32[1] for x in state):
        raise TypeError(f"batch: states must be lists of int32, got {state!r:.60}")
    return [len(state), *state]


def _choice(names: tuple):
    def check(values):
        return None if values[0] in names else f"expected one of {', '.join(names)}, got {values[0]!r:.40}"
    return check


def _simpler_pairs(values: tuple):
    """Smaller keys and namespaces, and key == namespace (composite hash 0: every such
    entry lands in one chain, which many bugs need and fewer entries then reach)."""
    key, namespace = values
    if type(key) is not int or type(namespace) is not int or key < 0 or namespace < 0:
        return []
    # Each candidate has a smaller key + namespace, so shrinking cannot go round in circles.
    candidates = []
    if key != namespace:
        candidates.append((min(key, namespace),) * 2)
    if key > 0:
        candidates.append((0, namespace))
    if namespace > 0:
        candidates.append((key, 0))
    return candidates


PAIR = Domain("pair", 2, simpler=_simpler_pairs, encode=lambda values, ref: [ref(values[0]), ref(values[1])])
STATE = Domain("state", check=_state_check, simpler=lambda v: [([],)] if v[0] else [], encode=_state_encode)
VALUE = Domain("value", check=_int_in(-(1 << 31), (1 << 31) - 1), simpler=lambda v: [(0,)] if v[0] != 0 else [])
READS = Domain("reads", check=_int_in(1), simpler=lambda v: [(1,)] if v[0] > 1 else [])
NEW_SNAPSHOT = Domain("new_snapshot", check=_int_in(0))
LIVE_SNAPSHOT = Domain("live_snapshot", check=_int_in(0))
RELEASED_SNAPSHOT = Domain("released_snapshot", check=_int_in(0))  # the step releases it
TRANSFORMER = Domain("transformer", check=_choice(TRANSFORMER_NAMES),  # encoded in declaration order
                     encode=lambda values, ref: [list(SNAPSHOT_TRANSFORMERS).index(values[0])])
POSITION = Domain("position", check=_int_in(0), simpler=lambda v: [(0,)] if v[0] > 0 else [])
CHANGE = Domain("change", check=_choice(("put", "remove")),
                encode=lambda values, ref: [0 if values[0] == "put" else 1])
NAMESPACE = Domain("namespace", encode=lambda values, ref: [ref(values[0])])
MAX_EMPTY = Domain("max_empty", check=_int_in(1))

_SNAPSHOT_DOMAINS = (NEW_SNAPSHOT, LIVE_SNAPSHOT, RELEASED_SNAPSHOT)


# ------------------------------------------------------------- operations


@attrs.frozen(kw_only=True)
class MapOperation(Operation):
    """A map operation. ``domains``: the argument domains, in argument order;
    ``keyed``: SPEC §4's keyed operations (one rehash step first); ``writes``:
    a rule that stores its pair for later reads; ``reads_written``: a rule
    that draws its pair from stored ones half the time; ``needs``: an
    optional API the operation uses (``incremental_visitor``); ``rule``: the
    Hypothesis rule's name; ``regression(args, expected)``: lines of a
    regression test through the public API; ``plainer(args)``: plainer steps
    that do part of this one's work (the shrinker tries them in its place,
    before simplifying arguments); ``batch``: whether the Flink
    bridge's batches (``Batch.java``) run it (parity programs draw only those)."""

    domains: tuple = ()
    keyed: bool = False
    writes: bool = False
    reads_written: bool = False
    needs: str | None = None
    batch: bool = True
    plainer: Callable[[tuple], Iterable[Step]] | None = None
    rule: str = ""
    regression: Callable[[tuple, Any], list[str]] | None = None

    @property
    def rule_name(self) -> str:
        return self.rule or self.name

    @property
    def snapshot_role(self) -> Domain | None:
        """The snapshot domain of the operation's first argument, if any."""
        return self.domains[0] if self.domains and self.domains[0] in _SNAPSHOT_DOMAINS else None


def _op(name: str, domains: tuple, template: str = "", **kw) -> MapOperation:
    args = kw.pop("args")
    return MapOperation(name=name, args=args, template=template, domains=domains, check=_checker(domains),
                        simplify=_simplifier(domains), **kw)


def _checker(domains: tuple):
    def check(args: tuple):
        at = 0
        for domain in domains:
            problem = domain.check(args[at: at + domain.arity])
            if problem:
                return problem
            at += domain.arity
        return None
    return check


def _simplifier(domains: tuple):
    def simplify(args: tuple):
        at = 0
        for domain in domains:
            for values in domain.simpler(args[at: at + domain.arity]):
                yield args[:at] + tuple(values) + args[at + domain.arity:]
            at += domain.arity
    return simplify


def draw_args(op: MapOperation, context) -> tuple:
    """The arguments of ``op`` drawn by ``context``, domain by domain, in order."""
    out: tuple = ()
    for domain in op.domains:
        out += domain.draw(context)
    return out


# Regression rendering (readable tests through the public API).

def _maybe_none(call: str, want) -> list[str]:
    return [f"assert {call} is None" if want is None else f"assert {call} == {want!r}"]


def _render_iterate_modify(a: tuple) -> str:
    change = f"m.put({a[1]!r}, {a[2]!r}, [0])" if a[3] == "put" else f"m.remove({a[1]!r}, {a[2]!r})"
    return (f"it = iter(m); [next(it) for _ in range({a[0]!r})]; {change}; list(it)  "
            f"# live iteration across a change")


MAP_OPS = OperationTable("map", [
    _op("put", (PAIR, STATE), "m.put({0!r}, {1!r}, {2!r})", args=("key", "namespace", "state"),
        keyed=True, writes=True,
        regression=lambda a, want: [f"m.put({a[0]!r}, {a[1]!r}, {a[2]!r})"]),
    _op("put_and_get_old", (PAIR, STATE), "m.put_and_get_old({0!r}, {1!r}, {2!r})",
        args=("key", "namespace", "state"), keyed=True, writes=True, plainer=lambda a: [Step("put", a)],
        regression=lambda a, want: _maybe_none(f"m.put_and_get_old({a[0]!r}, {a[1]!r}, {a[2]!r})", want)),
    _op("get", (PAIR,), "m.get({0!r}, {1!r})", args=("key", "namespace"), keyed=True, reads_written=True,
        regression=lambda a, want: _maybe_none(f"m.get({a[0]!r}, {a[1]!r})", want)),
    _op("get_mutate", (PAIR, VALUE),
        "v = m.get({0!r}, {1!r}); v is not None and v.append({2!r})  # mutate in place",
        args=("key", "namespace", "value"), keyed=True, reads_written=True, rule="get_then_mutate_in_place",
        regression=lambda a, want: [f"v = m.get({a[0]!r}, {a[1]!r})", "if v is not None:",
                                    f"    v.append({a[2]!r})  # the caller mutates the returned state in place",
                                    f"assert v == {want!r}"]),
    _op("contains_key", (PAIR,), "m.contains_key({0!r}, {1!r})", args=("key", "namespace"), keyed=True,
        reads_written=True, regression=lambda a, want: [f"assert m.contains_key({a[0]!r}, {a[1]!r}) == {want!r}"]),
    _op("remove", (PAIR,), "m.remove({0!r}, {1!r})", args=("key", "namespace"), keyed=True, reads_written=True,
        regression=lambda a, want: [f"m.remove({a[0]!r}, {a[1]!r})"]),
    _op("remove_and_get_old", (PAIR,), "m.remove_and_get_old({0!r}, {1!r})", args=("key", "namespace"),
        keyed=True, reads_written=True, plainer=lambda a: [Step("remove", a)],
        regression=lambda a, want: _maybe_none(f"m.remove_and_get_old({a[0]!r}, {a[1]!r})", want)),
    _op("transform", (PAIR, VALUE), "m.transform({0!r}, {1!r}, {2!r}, transform_append)",
        args=("key", "namespace", "value"), keyed=True, writes=True, reads_written=True,
        plainer=lambda a: [Step("put", (a[0], a[1], [a[2]]))],
        regression=lambda a, want: [f"m.transform({a[0]!r}, {a[1]!r}, {a[2]!r}, transform_append)"]),
    _op("rehash", (READS,), "for _ in range({0!r}): m.contains_key(-1, -1)  # drive the incremental rehash",
        args=("reads",),
        regression=lambda a, want: [f"for _ in range({a[0]!r}):",
                                    "    m.contains_key(-1, -1)  # drives the incremental rehash"]),
    _op("snapshot", (NEW_SNAPSHOT,), "s{0} = m.snapshot()", args=("sid",),
        regression=lambda a, want: [f"s{a[0]} = m.snapshot()"]),
    _op("read_snapshot", (LIVE_SNAPSHOT,), "list(s{0})", args=("sid",),
        regression=lambda a, want: [f"assert entries(s{a[0]}) == {want!r}"]),
    _op("read_snapshot_transformed", (RELEASED_SNAPSHOT, TRANSFORMER),
        "list(s{0}.iterate(SNAPSHOT_TRANSFORMERS[{1!r}])); s{0}.release()", args=("sid", "transformer"),
        rule="read_snapshot_transformed_then_release", plainer=lambda a: [Step("release", (a[0],))],
        regression=lambda a, want: [f"assert entries(s{a[0]}.iterate(SNAPSHOT_TRANSFORMERS[{a[1]!r}])) == {want!r}",
                                    f"s{a[0]}.release()"]),
    _op("release", (RELEASED_SNAPSHOT,), "s{0}.release(); s{0}.release()  # idempotent", args=("sid",),
        regression=lambda a, want: [f"s{a[0]}.release()", f"s{a[0]}.release()  # idempotent"]),
    _op("iterate", (), "list(m)", args=(), regression=lambda a, want: [f"assert entries(m) == {want!r}"]),
    _op("iterate_modify", (POSITION, PAIR, CHANGE), args=("position", "key", "namespace", "change"),
        render_with=_render_iterate_modify, rule="iterate_across_change",
        plainer=lambda a: [Step("put", (a[1], a[2], [0])) if a[3] == "put" else Step("remove", (a[1], a[2]))],
        regression=lambda a, want: [
            "it = iter(m)", f"for _ in range(min({a[0]!r}, len(m))):", "    next(it)",
            f"m.put({a[1]!r}, {a[2]!r}, [0])" if a[3] == "put" else f"m.remove({a[1]!r}, {a[2]!r})",
            "drain(it)  # may raise ConcurrentModificationError; the replay below checks which"]),
    _op("keys", (NAMESPACE,), "sorted(m.keys({0!r}))", args=("namespace",), rule="keys_of_namespace",
        regression=lambda a, want: [f"assert sorted(m.keys({a[0]!r}), key=repr) == {want!r}"]),
    _op("size_of_namespace", (NAMESPACE,), "m.size_of_namespace({0!r})", args=("namespace",),
        regression=lambda a, want: [f"assert m.size_of_namespace({a[0]!r}) == {want!r}"]),
    _op("visit", (MAX_EMPTY,), "visit_and_prune_even(m, {0!r})  # incremental visitor, TTL-style",
        args=("max_empty",), needs="incremental_visitor", rule="visit_and_prune",
        regression=lambda a, want: [f"visit_and_prune_even(m, {a[0]!r})"]),
    _op("write_snapshot", (LIVE_SNAPSHOT,), "written_entries(s{0})  # s{0}.write_state(out, *write_serializers())",
        args=("sid",), batch=False,
        regression=lambda a, want: [f"assert entries(written_entries(s{a[0]})) == {want!r}"]),
])

KEYED = frozenset(op.name for op in MAP_OPS if op.keyed)


def render(step: Step) -> str:
    """The step as a line of Python against a map ``m``."""
    return MAP_OPS.render(step)


def render_program(steps: list[Step], factory_line: str = "m = CopyOnWriteStateMap(capacity=4)") -> str:
    """A runnable Python program for the steps."""
    return "\n".join([factory_line] + [render(s) for s in steps])
