"""The map machine's operations, declared once (:data:`MAP_OPS`).

Every consumer of map programs reads this table: the harness applies
operation ``NAME`` with its method ``_op_NAME``; the Hypothesis machine makes
one rule per operation from the argument domains; seeded walks
(``cowcheck.map.walks``) and parity programs (``cowcheck.map.parity``)
draw arguments per domain; replay and counterexamples render and parse
steps with it; the shrinker simplifies arguments per domain; regression
tests render each step through the public API; the Flink bridge numbers
operations in this order and encodes arguments per domain (its ``Ops.java``
is generated from this table, ``cowcheck.flink.opcodes``). Adding an
operation is a record here, a harness method, the model's method if it is a
new semantic, and (for the bridge) its case in ``Walk.java``.

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

from cowcheck.core.keys import FAMILIES, family_of, nth_key
from cowcheck.core.program import (Domain, Operation, OperationTable, Step, domains_checker,
                                     domains_simplifier, draw_args)
from cowcheck.core.states import decode_written, write_serializers

__all__ = ["MapDomain", "MapOperation", "MAP_OPS", "SNAPSHOT_TRANSFORMERS", "TRANSFORMER_NAMES", "visit_and_prune_even",
           "write_serializers", "decode_written", "written_entries",
           "render", "render_program", "draw_args", "PAIR", "STATE", "VALUE", "READS", "NEW_SNAPSHOT",
           "LIVE_SNAPSHOT", "RELEASED_SNAPSHOT", "TRANSFORMER", "POSITION", "CHANGE", "NAMESPACE", "MAX_EMPTY",
           "FAMILY", "FIRST", "COUNT", "SIZE_CLASSES", "MAX_COUNT", "MAX_READS", "nth_key", "pick_weighted"]


# ------------------------------------------------------------ TTL helpers


def _drop_even_length(state):
    return None if isinstance(state, list) and len(state) % 2 == 0 else state


def _append_marker(state):
    return list(state) + [-1] if isinstance(state, list) else state


# TTL-style snapshot transformers, by name (replayable).
SNAPSHOT_TRANSFORMERS = {  # the bridge's Walk.java numbers them in this order
    "drop_even": _drop_even_length,
    "append_marker": _append_marker,
    "none": None,  # iterate(None): docs/contract.md §15's default, every entry as it is
}
TRANSFORMER_NAMES = tuple(sorted(SNAPSHOT_TRANSFORMERS))


# ------------------------------------------------------- write_state


def written_entries(snapshot) -> list:
    """The entries ``snapshot.write_state`` writes with Flink's serializers of its
    keys and namespaces, decoded (regression tests use it)."""
    first = next(iter(snapshot), None)
    serializers = write_serializers(*(first[:2] if first is not None else ()))
    out = io.BytesIO()
    snapshot.write_state(out, *serializers)
    return decode_written(out.getvalue(), serializers)[1]


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
class MapDomain(Domain):
    """A kind of argument of the map (:class:`~cowcheck.core.program.Domain`):
    ``encode(values, ref)`` gives the ints of the Flink bridge's batch encoding
    (``ref`` numbers keys and namespaces); ``wire``: how ``Walk.java`` decodes
    those, a letter per encoded value (``k`` a key or namespace index, ``s`` a
    state as its length and elements, ``i`` an int; ``cowcheck.flink.opcodes``)."""

    encode: Callable[[tuple, Callable], list] = lambda values, ref: [values[0]]
    wire: str = "i"


def _int_in(lo: int, hi: int | None = None):
    def check(values):
        v = values[0]
        if type(v) is not int or v < lo or (hi is not None and v > hi):
            return f"expected an int {'>= ' + str(lo) if hi is None else f'in [{lo}, {hi}]'}, got {v!r:.40}"
        return None
    return check


MAX_STATE = 1 << 10  # elements of a state a step may carry


def _state_check(values):
    state = values[0]
    if type(state) is not list:
        return f"a state must be a list of ints, got {type(state).__name__} {state!r:.40}"
    if len(state) > MAX_STATE or any(type(x) is not int or not _INT32[0] <= x <= _INT32[1] for x in state):
        return f"a state must be a list of at most {MAX_STATE} int32 values, got {state!r:.40}"
    return None


def _state_encode(values, ref):
    state = values[0]
    if any(type(x) is not int or not _INT32[0] <= x <= _INT32[1] for x in state):
        raise TypeError(f"batch: states must be lists of int32, got {state!r:.60}")
    return [len(state), *state]


def _choice(names: tuple):
    def check(values):
        return None if values[0] in names else f"expected one of {', '.join(names)}, got {values[0]!r:.40}"
    return check


def _key_problem(value, what: str) -> str | None:
    if family_of(value) is None:
        return (f"a {what} must be an int (Java int or long), a string, a Tuple2(int, string), a TimeWindow or "
                f"VOID_NAMESPACE, got {type(value).__name__} {value!r:.40}")
    return None


def _pair_check(values):
    return _key_problem(values[0], "key") or _key_problem(values[1], "namespace")


def _simpler_pairs(values: tuple):
    """Simpler keys and namespaces within their families (small ints, short strings), and
    for int keys and namespaces key == namespace (composite hash 0: every such entry lands
    in one chain, which many bugs need and fewer entries then reach)."""
    key, namespace = values
    kf, nf = family_of(key), family_of(namespace)
    if kf is None or nf is None:
        return []
    # Each candidate is simpler in one component and no worse in the other: no cycles.
    candidates = []
    if kf.name == nf.name == "int" and key != namespace and key >= 0 and namespace >= 0:
        candidates.append((min(key, namespace),) * 2)
    candidates += [(k, namespace) for k in kf.simpler(key)]
    candidates += [(key, n) for n in nf.simpler(namespace)]
    return candidates


def _namespace_check(values):
    return _key_problem(values[0], "namespace")


def _simpler_namespace(values):
    family = family_of(values[0])
    return [(n,) for n in family.simpler(values[0])] if family is not None else []


# Size classes of the maps walks and examples grow (entries at most); bulk steps reach them in one step.
SIZE_CLASSES = {"tiny": 8, "small": 128, "medium": 4_000, "large": 100_000}
MAX_COUNT = SIZE_CLASSES["large"]  # entries one bulk step may touch
MAX_READS = 1 << 16  # reads of one rehash step (a rehash of 10^5 entries needs ~2.5 * 10^4)
MAX_FIRST = (1 << 31) - 1


def _family_check(values):
    name = values[0]
    if name not in FAMILIES:
        return f"expected a key family, one of {', '.join(FAMILIES)}, got {name!r:.40}"
    return None


PAIR = MapDomain("pair", 2, check=_pair_check, simpler=_simpler_pairs,
              encode=lambda values, ref: [ref(values[0]), ref(values[1])], wire="kk")
STATE = MapDomain("state", check=_state_check, simpler=lambda v: [([],)] if v[0] else [], encode=_state_encode,
               wire="s")
VALUE = MapDomain("value", check=_int_in(-(1 << 31), (1 << 31) - 1), simpler=lambda v: [(0,)] if v[0] != 0 else [])
READS = MapDomain("reads", check=_int_in(1, MAX_READS), simpler=lambda v: [(1,)] if v[0] > 1 else [])
MAX_SID = 1 << 20
NEW_SNAPSHOT = MapDomain("new_snapshot", check=_int_in(0, MAX_SID), ids="new", pool="snapshots")
LIVE_SNAPSHOT = MapDomain("live_snapshot", check=_int_in(0, MAX_SID), ids="live", pool="snapshots")
RELEASED_SNAPSHOT = MapDomain("released_snapshot", check=_int_in(0, MAX_SID), ids="taken",
                              pool="snapshots")  # the step releases it
TRANSFORMER = MapDomain("transformer", check=_choice(TRANSFORMER_NAMES),  # encoded in declaration order
                     encode=lambda values, ref: [list(SNAPSHOT_TRANSFORMERS).index(values[0])])
POSITION = MapDomain("position", check=_int_in(0, MAX_COUNT * 4), simpler=lambda v: [(0,)] if v[0] > 0 else [])
CHANGE = MapDomain("change", check=_choice(("put", "remove")),
                encode=lambda values, ref: [0 if values[0] == "put" else 1])
NAMESPACE = MapDomain("namespace", check=_namespace_check, simpler=_simpler_namespace,
                   encode=lambda values, ref: [ref(values[0])], wire="k")
MAX_EMPTY = MapDomain("max_empty", check=_int_in(1, 1 << 20))
FAMILY = MapDomain("key_family", check=_family_check, encode=lambda values, ref: [list(FAMILIES).index(values[0])])
# A bulk step's first index and count: both shrink by halving (and count 1 becomes the single step).
FIRST = MapDomain("first", check=_int_in(0, MAX_FIRST), simpler=lambda v: [(0,), (v[0] // 2,)] if v[0] > 1 else
               [(0,)] if v[0] else [])
COUNT = MapDomain("count", check=_int_in(1, MAX_COUNT))

_SNAPSHOT_DOMAINS = (NEW_SNAPSHOT, LIVE_SNAPSHOT, RELEASED_SNAPSHOT)


# ------------------------------------------------------------- operations


@attrs.frozen(kw_only=True)
class MapOperation(Operation):
    """A map operation (its ``domains``: :class:`MapDomain`, in argument order).
    ``keyed``: docs/contract.md §4's keyed operations (one rehash step first); ``writes``:
    a rule that stores its pair for later reads; ``reads_written``: a rule
    that draws its pair from stored ones half the time; ``needs``: an
    optional API the operation uses (``incremental_visitor``);
    ``regression(args, expected)``: lines of a
    regression test through the public API; ``plainer(args)``: plainer steps
    that do part of this one's work (the shrinker tries them in its place,
    before simplifying arguments); ``whole_map``: it costs O(entries) on both sides (iteration, snapshot reads), so
    walks over large maps draw it rarely; ``bulk``: it applies its keyed operation to
    ``count`` keys of a family's bulk sequence (:func:`~cowcheck.core.keys.nth_key`)."""

    keyed: bool = False
    writes: bool = False
    reads_written: bool = False
    needs: str | None = None
    whole_map: bool = False
    bulk: bool = False
    plainer: Callable[[tuple], Iterable[Step]] | None = None
    regression: Callable[[tuple, Any], list[str]] | None = None

    @property
    def snapshot_role(self) -> Domain | None:
        """The snapshot domain of the operation's first argument, if any."""
        return self.domains[0] if self.domains and self.domains[0] in _SNAPSHOT_DOMAINS else None


def _op(name: str, domains: tuple, template: str = "", **kw) -> MapOperation:
    args = kw.pop("args")
    return MapOperation(name=name, args=args, template=template, domains=domains, check=domains_checker(domains),
                        simplify=domains_simplifier(domains), **kw)


def pick_weighted(r, weighted: tuple) -> str:
    """The name of one ``(name, weight)`` pair of ``weighted``, drawn with ``r`` by weight."""
    x = r.random() * sum(w for _, w in weighted)
    for name, w in weighted:
        x -= w
        if x < 0:
            return name
    return weighted[-1][0]


# Regression rendering (readable tests through the public API).

def _maybe_none(call: str, want) -> list[str]:
    return [f"assert {call} is None" if want is None else f"assert {call} == {want!r}"]


def _render_iterate_modify(a: tuple) -> str:
    change = f"m.put({a[1]!r}, {a[2]!r}, [0])" if a[3] == "put" else f"m.remove({a[1]!r}, {a[2]!r})"
    return (f"it = iter(m); [next(it) for _ in range({a[0]!r})]; {change}; list(it)  "
            f"# live iteration across a change")


def _render_range(call: str):
    def render(a: tuple) -> str:
        family, first, count, namespace = a[:4]
        extra = "".join(f", {x!r}" for x in a[4:])
        return (f"for i in range({first!r}, {first + count!r}): "
                f"m.{call}(nth_key({family!r}, i), {namespace!r}{extra})")
    return render


def _halves(single: str):
    """Plainer forms of a bulk step: its lower half, its upper half, and for one key the single step."""
    def plainer(a: tuple) -> list:
        family, first, count, namespace = a[:4]
        if count == 1:
            return [Step(single, (nth_key(family, first), namespace) + tuple(a[4:]))]
        half = count // 2
        return [Step(plainer.op, (family, first, half, namespace) + tuple(a[4:])),
                Step(plainer.op, (family, first + half, count - half, namespace) + tuple(a[4:]))]
    return plainer


def _bulk(name: str, single: str, domains: tuple, args: tuple, **kw) -> MapOperation:
    plainer = _halves(single)
    plainer.op = name
    render = _render_range(single)
    return _op(name, domains, args=args, render_with=render, plainer=plainer, bulk=True,
               regression=lambda a, want: [render(a)], **kw)


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
    _op("rehash", (PAIR, READS), "for _ in range({2!r}): m.contains_key({0!r}, {1!r})  # drive the incremental "
                                 "rehash", args=("key", "namespace", "reads"),
        legacy=lambda raw: [-1, -1, raw[0]] if len(raw) == 1 else None,
        regression=lambda a, want: [f"for _ in range({a[2]!r}):",
                                    f"    m.contains_key({a[0]!r}, {a[1]!r})  # drives the incremental rehash"]),
    _op("snapshot", (NEW_SNAPSHOT,), "s{0} = m.snapshot()", args=("sid",),
        regression=lambda a, want: [f"s{a[0]} = m.snapshot()"]),
    _op("read_snapshot", (LIVE_SNAPSHOT,), "list(s{0})", whole_map=True, args=("sid",),
        regression=lambda a, want: [f"assert entries(s{a[0]}) == {want!r}"]),
    _op("read_snapshot_transformed", (RELEASED_SNAPSHOT, TRANSFORMER),
        "list(s{0}.iterate(SNAPSHOT_TRANSFORMERS[{1!r}])); s{0}.release()", whole_map=True, args=("sid", "transformer"),
        rule="read_snapshot_transformed_then_release", plainer=lambda a: [Step("release", (a[0],))],
        regression=lambda a, want: [f"assert entries(s{a[0]}.iterate(SNAPSHOT_TRANSFORMERS[{a[1]!r}])) == {want!r}",
                                    f"s{a[0]}.release()"]),
    _op("release", (RELEASED_SNAPSHOT,), "s{0}.release(); s{0}.release()  # idempotent", args=("sid",),
        regression=lambda a, want: [f"s{a[0]}.release()", f"s{a[0]}.release()  # idempotent"]),
    _op("iterate", (), "list(m)", whole_map=True, args=(), regression=lambda a, want: [f"assert entries(m) == {want!r}"]),
    _op("iterate_modify", (POSITION, PAIR, CHANGE), whole_map=True, args=("position", "key", "namespace", "change"),
        render_with=_render_iterate_modify, rule="iterate_across_change",
        plainer=lambda a: [Step("put", (a[1], a[2], [0])) if a[3] == "put" else Step("remove", (a[1], a[2]))],
        regression=lambda a, want: [
            "it = iter(m)", f"for _ in range(min({a[0]!r}, len(m))):", "    next(it)",
            f"m.put({a[1]!r}, {a[2]!r}, [0])" if a[3] == "put" else f"m.remove({a[1]!r}, {a[2]!r})",
            "drain(it)  # may raise ConcurrentModificationError; the replay below checks which"]),
    _op("keys", (NAMESPACE,), "sorted(m.keys({0!r}))", whole_map=True, args=("namespace",), rule="keys_of_namespace",
        regression=lambda a, want: [f"assert sorted(m.keys({a[0]!r})) == {want!r}"]),
    _op("size_of_namespace", (NAMESPACE,), "m.size_of_namespace({0!r})", whole_map=True, args=("namespace",),
        regression=lambda a, want: [f"assert m.size_of_namespace({a[0]!r}) == {want!r}"]),
    _op("visit", (MAX_EMPTY,), "visit_and_prune_even(m, {0!r})  # incremental visitor, TTL-style",
        whole_map=True, args=("max_empty",), needs="incremental_visitor", rule="visit_and_prune",
        regression=lambda a, want: [f"visit_and_prune_even(m, {a[0]!r})"]),
    _bulk("put_range", "put", (FAMILY, FIRST, COUNT, NAMESPACE, STATE),
          args=("family", "first", "count", "namespace", "state"), writes=True),
    _bulk("remove_range", "remove", (FAMILY, FIRST, COUNT, NAMESPACE), args=("family", "first", "count", "namespace")),
    _bulk("get_range", "get", (FAMILY, FIRST, COUNT, NAMESPACE), args=("family", "first", "count", "namespace")),
    _op("hold_keys", (), "# the caller holds its key objects from here on: equal keys are the same object",
        args=(), regression=lambda a, want: ["# from here on the caller passes the same key objects (held_keys)"]),
    _op("write_snapshot", (LIVE_SNAPSHOT,), "written_entries(s{0})  # s{0}.write_state(out, *write_serializers())",
        whole_map=True, args=("sid",),
        regression=lambda a, want: [f"assert entries(written_entries(s{a[0]})) == {want!r}"]),
])

KEYED = frozenset(op.name for op in MAP_OPS if op.keyed)


def render(step: Step) -> str:
    """The step as a line of Python against a map ``m``."""
    return MAP_OPS.render(step)


def render_program(steps: list[Step], factory_line: str = "m = CopyOnWriteStateMap(capacity=4)") -> str:
    """A runnable Python program for the steps."""
    return "\n".join([factory_line] + [render(s) for s in steps])
