"""Walks on Flink's map a segment per Java call: the map harness's checks, at the speed of a batch.

One JPype round trip per operation caps Flink walks at a few thousand checked
steps a second. Here ``Walk.java`` runs a whole segment of a walk (by default
up to 512 steps) on the real ``CopyOnWriteStateMap`` in one call, making the
very calls the map harness makes into an implementation, in the same order and
with the same decisions, and records each call's answer (a value or the
exception raised), the size after every step and, white-box, the scenarios and
the invariants I1–I9 computed over Flink's object graph (``Checker.java``).

Python then runs the harness itself (:class:`WalkHarness`, a
:class:`~cowcheck.map.harness.Harness`) against :class:`WalkMap`, which hands
out the recorded answers: every model check (P1–P7) is the harness's own, step
by step, so a failure names its exact step, and the program shrinks and replays
as any other. States cross as ``[content, number]`` (numbered by identity in
order of first appearance), and :class:`WalkMap` keeps one Python object per
number, so the identity rules (P6) are checked as on the per-operation bridge.

Steps travel in the batched encoding (:func:`cowcheck.flink.batch.encode`):
keys and namespaces as a table of values, of which ``KeyObjects.java`` makes
the object each call is handed, as the harness hands them (a new object per
call, one per value after ``hold_keys``); bulk steps as their family, first
index and count, their keys computed in Java (``Keys.nth``) and each single
call recorded. A segment holds up to :data:`SEGMENT` steps and
:data:`SEGMENT_CALLS` calls into the map.

Only Flink's own time is charged to Flink: ``Walk.java`` times each call into
the map (``Clock.java``) and records each step's longest, which the harness
charges against the run's pace and step time limit as it applies that step
(:func:`cowcheck.core.limits.charge`: a slow call is the TIMEOUT of the step
that made it, confirmed call by call under the full limit before it is stored);
the segment runs as a :func:`~cowcheck.core.limits.metered_call` whose meter is
the phase ``Clock.java`` publishes in 8 bytes of Python's memory, so the
watchdog ends the process only for a call of Flink's that does not return,
never for the segment's checking (I1–I9 in Java over maps of up to 100,000
entries), encoding or recording.

If the harness asks for a call the walk did not record (it cannot, unless the
two sides disagree on how a step is driven), :class:`OutOfStep` is raised: an
error of cowcheck's, never the map's. Campaigns confirm every failure found this
way on the per-operation bridge before they store it.

Parity runs here too (:func:`run_batch`): the same harness over a walk that
also records the structure after each step (``detail``), observed by
:func:`cowcheck.map.parity.observe` as any map is; ``WalkMap.introspect``
builds the white-box view from those records (one Python object per Java entry
and state), so Flink's digest is computed by the same function as the
reference's.

>>> harness = WalkHarness(WalkMap(), white_box=True)     # doctest: +SKIP
>>> program = [Step("put", (1, 0, [5])), Step("get", (1, 0))]
>>> harness.expect(program); [harness.apply(s) for s in program]   # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from array import array
from collections import deque
from itertools import islice

import attrs

from cowcheck.core.errors import InternalError
from cowcheck.core.failures import INVARIANT
from cowcheck.core.limits import charge, metered_call
from cowcheck.core.program import Step
from cowcheck.core.states import copy_state
from cowcheck.flink.batch import encode, java_keys
from cowcheck.flink.convert import decode_tagged, exception_for
from cowcheck.flink.jvm import Java, jvm
from cowcheck.flink.map import FLINK_CAPACITY, EntryMirror, FlinkCapacityError, FlinkView
from cowcheck.map.harness import Harness, _count
from cowcheck.map.ops import MAP_OPS
from cowcheck.map.parity import observe
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2

__all__ = ["WalkMap", "WalkHarness", "WalkView", "OutOfStep", "SEGMENT", "DETAILS", "encode_steps", "run_batch"]

SEGMENT = 512  # steps per Java call at most
SEGMENT_CALLS = 1 << 16  # and calls into the map at most (bulk steps make one per key), beyond its first step
_BULK = frozenset(op.name for op in MAP_OPS if op.bulk)
_END = object()
# What a walk records after each step, per detail of cowcheck.map.parity.observe (Walk.DETAIL_*):
# nothing, the structure summary (a final digest is read from Java once no step runs ahead), the structure.
DETAILS = {"results": 0, "summary": 1, "final": 1, "every_step": 2}


class OutOfStep(InternalError):
    """The harness made a call the Java walk did not record: cowcheck's own error (exit 3)."""


class _Raised:
    """A recorded exception: the Java class (Python-side name) and its message."""

    __slots__ = ("name", "message")

    def __init__(self, name: str, message: str) -> None:
        self.name, self.message = name, message


def _hook(obj: dict, _tuple2=Tuple2, _window=TimeWindow, _void=VOID_NAMESPACE):
    """A JSON object of a walk's answers: a tagged key (most often), or an exception with its message."""
    fields = obj.get("Tuple2")
    if fields is not None:
        return _tuple2(*fields)
    fields = obj.get("TimeWindow")
    if fields is not None:
        return _window(*fields)
    if "VoidNamespace" in obj:
        return _void
    if "raised" in obj:
        return _Raised(obj["raised"], obj.get("message", ""))
    return decode_tagged(obj)


def encode_steps(steps: list[Step]) -> tuple[list[int], list]:
    """Steps as Walk.java's op codes and argument ints; keys and namespaces as
    indexes into a table of values (the batched encoding, ``cowcheck.flink.batch.encode``)."""
    return encode(steps)


def _calls(step: Step) -> int:
    """How many calls into the map a step makes at least (a bulk step one per key)."""
    return step.args[2] if step.op in _BULK else 1


# ------------------------------------------------------------------ the map


class WalkMap:
    """Flink's map as the harness sees it in a batched walk: docs/contract.md §15's calls,
    answered from what ``Walk.java`` recorded for the current step.

    ``corruption``: a seeded Java-side corruption (``cowcheck.flink.corruptions``);
    ``detail``: what the walk records of the structure after each step (:data:`DETAILS`'s values:
    0 nothing, 1 its summary, 2 the whole structure), for :meth:`introspect`."""

    def __init__(self, capacity: int = FLINK_CAPACITY, state_copier=None, corruption: str = "",
                 detail: int = 0) -> None:
        if capacity != FLINK_CAPACITY or type(capacity) is not int:
            raise FlinkCapacityError(capacity)
        self.corruption = corruption
        self.detail = detail
        self.white_box: bool | None = None
        self._mirrors: dict[int, EntryMirror] = {}  # entry number -> its Python object (introspect)
        self._walk = None
        self._records: deque = deque()
        self._events = iter(())
        self._record = None
        self._op = ""
        self._twins: dict[int, object] = {}
        self._phase = bytearray(8)  # Clock.java's phase, written by Java and read by the watchdog (meter)

    # ------------------------------------------------------ driving Java

    def start(self, white_box: bool) -> None:
        """Create the Java walk (once): white-box or black-box."""
        if self._walk is not None:
            raise InternalError("WalkMap.start called twice")
        jvm()
        import jpype.nio

        self.white_box = white_box
        self._walk = Java.Walk(white_box, self.corruption, self.detail, jpype.nio.convertToDirectBuffer(self._phase))

    def meter(self) -> int:
        """Clock.java's phase: odd while a call into Flink's map runs (read from any thread, no JVM call)."""
        return int.from_bytes(self._phase, sys.byteorder)

    def pending(self) -> int:
        """Steps recorded and not yet applied."""
        return len(self._records)

    def run(self, steps: list[Step], bound: int) -> None:
        """Run ``steps`` on the Java side; their records wait for :meth:`begin`."""
        program, table = encode(steps)
        text = self._walk.run(Java.int_array(array("i", program)), java_keys(table), bound)  # a buffer: one copy
        records = json.loads(str(text), object_hook=_hook)
        if len(records) != len(steps):
            raise InternalError(f"the Java walk answered {len(records)} steps for {len(steps)}")
        self._records.extend(records)

    def begin(self, op: str) -> list:
        """The record of the next step (``op``): its answers become the calls' results."""
        if not self._records:
            raise OutOfStep(f"no recorded answers for {op}")
        self._record = self._records.popleft()
        self._events = iter(self._record[0])
        self._op = op
        return self._record

    def discard(self) -> None:
        """Forget the records of steps that will not be applied (the program changed)."""
        self._records.clear()

    # ---------------------------------------------------------- answers

    def _next(self, what: str):
        try:
            return next(self._events)
        except StopIteration:
            raise OutOfStep(f"{self._op}: the harness called {what}, which the Java walk did not record") from None

    def _value(self, what: str):
        value = self._next(what)
        if isinstance(value, _Raised):
            raise exception_for(value.name, value.message)
        return value

    def _bind(self, number: int, obj) -> None:
        self._twins[number] = obj

    def _state(self, seen):
        """The Python object for ``[content, number]`` (None for None), its content Java's; a
        number alone: the object already holds Java's content."""
        if seen is None:
            return None
        if type(seen) is int:
            return self._twins[seen]
        content, number = seen
        twin = self._twins.get(number)
        if twin is None:
            twin = self._twins[number] = list(content)
        elif twin != content:
            twin[:] = content
        return twin

    def _row(self, row) -> tuple:
        key, namespace, seen = row
        return key, namespace, self._state(seen)

    # --------------------------------------------------------- docs/contract.md §15

    def put(self, key, namespace, state) -> None:
        self._bind(self._value("put"), state)

    def put_and_get_old(self, key, namespace, state):
        number, old = self._value("put_and_get_old")
        got = self._state(old)
        self._bind(number, state)
        return got

    def get(self, key, namespace):
        return self._state(self._value("get"))

    def contains_key(self, key, namespace) -> bool:
        return self._value("contains_key")

    def remove(self, key, namespace) -> None:
        self._value("remove")

    def remove_and_get_old(self, key, namespace):
        return self._state(self._value("remove_and_get_old"))

    def transform(self, key, namespace, value, fn) -> None:
        called, old, number, raised = self._value("transform")
        if called:
            self._bind(number, fn(self._state(old), value))
        if raised is not None:
            raise exception_for(raised.name, raised.message)

    def __len__(self) -> int:
        return self._record[1]

    def is_empty(self) -> bool:
        return self._record[1] == 0

    def size_of_namespace(self, namespace) -> int:
        return self._value("size_of_namespace")

    def __iter__(self):
        rows, raised = self._value("iter"), self._next("iter")
        # iterate_modify: whether Java read all the rows before the change (then the rest follows it)
        phased = self._op == "iterate_modify" and self._next("iter")
        return _Rows(self, rows, raised, phased)

    def keys(self, namespace):
        return _Rows(self, self._value("keys"), self._next("keys"), False, keys=True)

    def incremental_visitor(self, recommended_max_records: int) -> "_Visitor":
        self._value("incremental_visitor")
        return _Visitor(self)

    def snapshot(self) -> "_Snapshot":
        version, count = self._value("snapshot")
        return _Snapshot(self, version, count)

    # --------------------------------------------------------- white box

    def introspect(self) -> "WalkView":
        """The structure after the current step, as the walk recorded it (``detail``); once no
        step has run ahead of the current one, as Java reads it now (``Walk.structure``)."""
        if not self._records:
            return self._view(json.loads(str(self._walk.structure()), object_hook=_hook))
        if not self.detail or self._record is None:
            raise OutOfStep("introspect: the walk records no structure (detail 0)")
        return self._view(self._record[5 if self.white_box else 2])

    def _view(self, recorded: list) -> "WalkView":
        """The view of a recorded structure (``Walk.structure``), or of a recorded summary
        (``[summary, rehashing]``: tables of their lengths without their entries)."""
        if len(recorded) == 2:
            (plen, rlen, psize, rsize, rehash_index, threshold, mod_count, version, required), rehashing = recorded
            return WalkView([None] * plen, [None] * rlen, rehashing, psize, rsize, rehash_index, threshold,
                            mod_count, version, required, set())
        (plen, rlen, psize, rsize, rehash_index, threshold, mod_count, version, required), rehashing, versions, \
            records, primary, rehash, live = recorded
        mirrors = self._mirrors
        for number, key, namespace, _, seen, entry_version, state_version, h in records:  # in Java's order
            mirror = mirrors.get(number)
            if mirror is None:
                mirror = mirrors[number] = EntryMirror(key, namespace)
            mirror.state = self._state(seen)
            mirror.entry_version, mirror.state_version, mirror.hash = entry_version, state_version, h
        for number, _, _, following, *_ in records:
            mirrors[number].next = mirrors[following] if following else None
        heads = [mirrors[n] if n else None for n in primary]
        rehash_heads = [mirrors[n] if n else None for n in rehash]
        return WalkView(heads, rehash_heads, rehashing, psize, rsize, rehash_index, threshold, mod_count, version,
                        required, set(versions), live_snapshots=[(v, [mirrors[n] for n in numbers])
                                                                 for v, numbers in live])

    def __repr__(self) -> str:
        return f"WalkMap(corruption={self.corruption!r})"


@attrs.define
class WalkView(FlinkView):
    """The white-box view of a batched walk's map (``WalkMap.introspect``): the tables' entries
    as one :class:`~cowcheck.flink.map.EntryMirror` per Java entry, and ``live_snapshots``,
    the unreleased snapshots in creation order as ``(version, their entries in order)``."""

    live_snapshots: list = attrs.Factory(list)


class _Rows:
    """A recorded iteration: rows, then the exception Java's iterator raised (or the end).
    ``phased``: iterate_modify's, whose second part (after the change) is read when the first runs out."""

    __slots__ = ("map", "rows", "raised", "phased", "keys")

    def __init__(self, m: WalkMap, rows: list, raised, phased: bool, keys: bool = False) -> None:
        self.map, self.rows, self.raised, self.phased, self.keys = m, deque(rows), raised, phased, keys

    def __iter__(self):
        return self

    def __next__(self):
        if not self.rows and self.phased and self.raised is None:
            self.phased = False
            self.rows = deque(self.map._value("iteration after the change"))
            self.raised = self.map._next("iteration after the change")
        if self.rows:
            row = self.rows.popleft()
            return row if self.keys else self.map._row(row)
        if self.raised is not None:
            raised, self.raised = self.raised, None
            raise exception_for(raised.name, raised.message)
        raise StopIteration


class _Visitor:
    """A recorded visit (see ``Walk.visit``): the chains nextEntries returned, in order,
    with how many of their entries the harness is to remove, then how hasNext ended it."""

    __slots__ = ("map", "chains", "end", "expected", "removed", "raised")

    def __init__(self, m: WalkMap) -> None:
        self.map = m
        self.chains = deque(m._next("the visit's chains"))
        self.end = m._next("the visit's end")
        self.expected = self.removed = 0
        self.raised = None

    def has_next(self) -> bool:
        if self.removed != self.expected:
            raise OutOfStep(f"visit: the harness removed {self.removed} entries of a chain, the Java walk "
                            f"{self.expected}")
        if self.chains:
            return True
        if isinstance(self.end, _Raised):
            raise exception_for(self.end.name, self.end.message)
        return self.end == "cap"  # Java stopped at its call cap (beyond the harness's own limit)

    def next_entries(self) -> list:
        self.expected = self.removed = 0
        self.raised = None
        if not self.chains:
            return []
        chain = self.chains.popleft()
        if chain == 0:
            return []
        if isinstance(chain, _Raised):
            raise exception_for(chain.name, chain.message)
        if len(chain) > 1:
            self.expected = chain[1]
            if len(chain) > 2:
                self.raised = chain[2]
        row = self.map._row
        return [row(r) for r in chain[0]]

    def remove(self, entry) -> None:
        if self.removed < self.expected:
            self.removed += 1
            return
        if self.raised is not None:
            raised, self.raised = self.raised, None
            raise exception_for(raised.name, raised.message)
        raise OutOfStep("visit: the harness removed an entry the Java walk did not")


class _View:
    """``snapshot.iterate(fn)``'s view: its size and rows."""

    __slots__ = ("size", "items")

    def __init__(self, size: int, items: list) -> None:
        self.size, self.items = size, items

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return iter(self.items)


class _Snapshot:
    __slots__ = ("map", "version", "count")

    def __init__(self, m: WalkMap, version: int, count: int) -> None:
        self.map, self.version, self.count = m, version, count

    def __len__(self) -> int:
        return self.count

    def released(self) -> bool:  # a method: reading the attribute pops no answer, calling it does
        return self.map._value("released")

    def release(self) -> None:
        self.map._value("release")

    def is_owner(self, m) -> bool:
        return m is self.map

    def __iter__(self):
        return _Rows(self.map, self.map._value("snapshot iteration"), self.map._next("snapshot iteration"), False)

    def iterate(self, transformer=None) -> _View:
        size, rows = self.map._value("iterate")
        return _View(size, [self.map._row(r) for r in rows])

    def write_state(self, out, key_serializer, namespace_serializer, state_serializer, transformer=None) -> None:
        """What Flink's writeState wrote with the serializers of these ids (``Walk.writeSnapshot``
        wrote with those of the snapshot's first entry and with Int ones)."""
        ids = tuple(getattr(s, "serializer_id", None) for s in (key_serializer, namespace_serializer, state_serializer))
        key_id, namespace_id, first, *with_ints = self.map._value("write_state")
        if key_id is None or ids[:2] == (key_id, namespace_id):
            written = first  # an empty snapshot writes the same bytes with any serializers
        elif ids[:2] == ("int", "int") and with_ints:
            written = with_ints[0]
        else:
            raise OutOfStep(f"write_state with serializers {ids}: the Java walk wrote with {(key_id, namespace_id)} "
                            f"and ('int', 'int')")
        if ids[2] != "list<int>" or transformer is not None:
            raise OutOfStep(f"write_state with serializers {ids}: the Java walk writes states with 'list<int>'")
        if isinstance(written, _Raised):
            raise exception_for(written.name, written.message)
        out.write(bytes.fromhex(written))

    def __repr__(self) -> str:
        return f"WalkSnapshot(version={self.version}, entries={self.count})"


# -------------------------------------------------------------- the harness


class _Before:
    """What a step's white-box decisions need of the structure before it (visit: rehashing?)."""

    __slots__ = ("is_rehashing",)

    def __init__(self, rehashing: bool) -> None:
        self.is_rehashing = rehashing


class WalkHarness(Harness):
    """The map harness over a :class:`WalkMap`: the model checks are the
    harness's own; white-box, the invariants and scenarios come from the Java
    walk (computed over Flink's objects after every step, as the Python checks
    would over the per-operation bridge's mirrors).

    :meth:`expect` hands it the steps about to be applied, so they run on the
    Java side a segment per call; without it, each step is a call of its own
    (still correct, only slower)."""

    runs_ahead = True

    def __init__(self, impl: WalkMap, *, white_box: bool | None = None, state_copier=copy_state,
                 strict_live_iteration: bool = False, symbolic: bool = False,
                 capacity: int = FLINK_CAPACITY, contract: str = "flink", key_families: tuple | None = None,
                 namespace_families: tuple | None = None) -> None:
        super().__init__(impl, white_box=False, state_copier=state_copier,
                         strict_live_iteration=strict_live_iteration, symbolic=symbolic, capacity=capacity,
                         contract=contract, key_families=key_families, namespace_families=namespace_families)
        self.white_box = True if white_box is None else bool(white_box)
        self.walk = impl  # the harness calls self.impl (this walk, or parity's tap over it)
        impl.start(self.white_box)
        self._ahead: deque = deque()

    def expect(self, steps) -> None:
        """The steps about to be applied, in order (they run ahead, a segment per Java call)."""
        self.walk.discard()
        self._ahead = deque(steps)

    def _apply(self, step: Step) -> None:
        impl, ahead = self.walk, self._ahead
        if ahead and ahead[0] is step:
            ahead.popleft()
        else:  # applied without expect (or another step than announced): this step alone
            ahead.clear()
            impl.discard()
        if not impl._records:
            segment = [step]  # the steps after it stay ahead: their records are queued
            calls = _calls(step)
            for later in islice(ahead, SEGMENT - 1):
                calls += _calls(later)
                if calls > SEGMENT_CALLS:
                    break
                segment.append(later)
            # An upper bound on the model's size during the segment (iteration and visit bounds).
            # Flink's own calls, under the step time limit (the checks between and after them are not)
            metered_call(impl.meter, impl.run, segment, len(self.model) + sum(map(_calls, segment)))
        self._record = impl.begin(step.op)
        charge(self._record[-1] / 1e9)  # the step's longest call into Flink (Clock.java), in seconds
        super()._apply(step)
        if next(impl._events, _END) is not _END:
            raise OutOfStep(f"{step.op}: the Java walk recorded more calls than the harness made")

    def _count_structure_scenarios(self, step: Step) -> None:
        # white-box records: [answers, size, scenarios, rehashing before, violations, (detail), longest call]
        scenarios = self._record[2]
        if scenarios:
            _count(self.coverage, scenarios)

    def _view(self, step: Step):
        return _Before(self._record[3])

    def check_invariants(self, step: Step) -> None:
        self._unchecked = 0  # as Harness.check_invariants: past 512 entries the checks are sampled alike
        violations = self._record[4]
        if violations:
            code, message = violations[0]
            more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
            self._fail(INVARIANT, code, f"after {MAP_OPS.render(step)}: {message}{more}")


def run_batch(steps: list[Step], detail: str = "final") -> list:
    """A whole program on a fresh Flink map, observed as :func:`cowcheck.map.parity.observe`
    observes any map: the map harness over a batched walk (a Java call per :data:`SEGMENT` steps)
    that records the structure ``detail`` asks for. ``observe(reference, p) == run_batch(p)`` is
    the parity of Flink and the reference on program ``p``. A step the map's table does not allow
    is a ValueError before anything runs."""
    if detail not in DETAILS:
        raise ValueError(f"run_batch: detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    encode(steps, check=True)
    return observe(WalkMap(detail=DETAILS[detail]), steps, detail, harness_class=WalkHarness)

