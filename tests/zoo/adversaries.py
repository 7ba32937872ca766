"""The adversary zoo: maps cowcheck did not write, odd or wrong the way a user's map is.

Each entry of :data:`ZOO` is a factory (``adversaries:NAME`` with tests/zoo on
PYTHONPATH) and the verdict the suite must reach on it, run as a user runs
it: the exit code of ``cowcheck check``, and for a failure its kind and code.
Odd but correct maps must pass; wrong ones must fail for the right reason;
maps the tool cannot drive as asked are bad usage (exit 2), never a failure.
tests/test_zoo.py holds ``check``, ``replay`` and the campaign executor to
these verdicts; docs/zoo.md lists them.

Nothing here imports cowcheck: the maps build on :mod:`tiny` (black-box) or
wrap the reference port only to offer a white-box view of another shape. The
one map that patches cowcheck at import lives in :mod:`patches_cowcheck`, so
that importing this table runs no patch.
"""

import copy
import io
import os
import random
import re
import sys

import attrs

from tiny import TinyIterator, TinyMap, TinySnapshot


@attrs.frozen
class Verdict:
    """What ``cowcheck check --impl <module>:<factory> [args]`` must give."""

    factory: str
    exit: int
    kind: str | None = None
    code: str | None = None
    args: tuple = ()
    says: str = ""  # a phrase the one-line message or notice must contain
    prints: str = ""  # a phrase the output (the failure's message) must contain
    what: str = ""
    nondeterministic: bool = False  # the stored failure must be marked nondeterministic
    module: str = "adversaries"
    steps: int | None = None  # the stored program's length, where it is known (0: building the map fails)

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.factory}"


# ----------------------------------------------------------------- lies


class _LyingSnapshot(TinySnapshot):
    def __init__(self, owner, version, items):
        super().__init__(owner, version, items)
        self.count = len(items)  # its size is right...
        self.released = True  # ...but it claims to be released from the start...
        self.items = []  # ...and iterates nothing

    def __len__(self):
        return self.count


class LiesReleased(TinyMap):
    def snapshot(self):
        self.version += 1
        self.live.add(self.version)
        return _LyingSnapshot(self, self.version, list(self.data))


class LiesLength(TinyMap):
    def __len__(self):
        return len(self.data) + (1 if self.live else 0)  # counts a phantom entry while a snapshot is live


class LiesVersion(TinyMap):
    def snapshot(self):
        snap = super().snapshot()
        snap.version = 1  # every snapshot says it is the first
        return snap


class WritesKeyFirst(TinyMap):
    """write_state writes key before namespace (Flink writes namespace, key, state)."""

    def snapshot(self):
        snap = super().snapshot()

        def write_state(out, key_serializer, namespace_serializer, state_serializer, transformer=None):
            view = snap.iterate(transformer)
            out.write(len(view).to_bytes(4, "big", signed=True))
            for k, n, s in view:
                key_serializer.serialize(k, out)
                namespace_serializer.serialize(n, out)
                state_serializer.serialize(s, out)

        snap.write_state = write_state
        return snap


class WritesShortCount(TinyMap):
    """write_state's count leaves out the last entry (whose bytes are written all the same)."""

    def snapshot(self):
        snap = super().snapshot()
        write = snap.write_state

        def write_state(out, *serializers, transformer=None):
            scratch = io.BytesIO()
            write(scratch, *serializers, transformer)
            data = scratch.getvalue()
            count = int.from_bytes(data[:4], "big", signed=True)
            out.write(max(count - 1, 0).to_bytes(4, "big", signed=True) + data[4:])

        snap.write_state = write_state
        return snap


class ReleaseNotIdempotent(TinyMap):
    """A second release() of a snapshot raises (docs/contract.md §15: release is idempotent)."""

    def snapshot(self):
        snap = super().snapshot()
        release = snap.release

        def release_once():
            if snap.released:
                raise RuntimeError("snapshot already released")
            release()

        snap.release = release_once
        return snap


class ForgetsRelease(TinyMap):
    def snapshot(self):
        snap = super().snapshot()
        snap.release = lambda: self.release_version(snap.version) if snap.version in self.live else None
        return snap  # releasing works, but released stays False


# ------------------------------------------------------- foreign types


class TupleStates(TinyMap):
    def get(self, key, namespace):
        state = super().get(key, namespace)
        return tuple(state) if isinstance(state, list) else state  # hands out a tuple, not the state


class KeysAsList(TinyMap):
    def keys(self, namespace):
        return [k for (k, n) in self.data if n == namespace]  # a list, not an iterator: fine


class _MethodFlagsSnapshot(TinySnapshot):
    """``released`` and ``version`` as methods (docs/contract.md §16: either is fine)."""

    def __init__(self, owner, version, items):
        super().__init__(owner, version, items)
        self._version, self._released = version, False
        del self.released, self.version

    def released(self):
        return self._released

    def version(self):
        return self._version

    def release(self):
        if not self._released:
            self.owner.release_version(self._version)
            self._released = True


class FlagsAsMethods(TinyMap):
    def snapshot(self):
        self.version += 1
        self.live.add(self.version)
        return _MethodFlagsSnapshot(self, self.version, [(k, n, s[0]) for (k, n), s in self.data.items()])


# -------------------------------------------------------------- errors


class _PlainError(ValueError):
    pass


class OddException(TinyMap):
    def __iter__(self):
        inner = super().__iter__()

        def guarded():
            while True:
                try:
                    yield next(inner)
                except StopIteration:
                    return
                except RuntimeError:
                    raise _PlainError("map modified") from None  # a ValueError, not a RuntimeError

        return guarded()


class SnapshotLenRaises(TinyMap):
    def snapshot(self):
        snap = super().snapshot()
        snap.__class__ = _LenRaises
        return snap


class _LenRaises(TinySnapshot):
    def __len__(self):
        raise OverflowError("cannot count")


# --------------------------------------------------------------- hangs


class HangsInGet(TinyMap):
    def get(self, key, namespace):
        while len(self.live) >= 2:  # with two snapshots live, get never returns
            pass
        return super().get(key, namespace)


class _EndlessSnapshot(TinySnapshot):
    def __iter__(self):
        items = list(self.items)
        while items:
            yield from items  # round and round


class EndlessSnapshotIteration(TinyMap):
    def snapshot(self):
        snap = super().snapshot()
        snap.__class__ = _EndlessSnapshot
        return snap


class Slow(TinyMap):
    def get(self, key, namespace):
        import time

        time.sleep(0.002)  # correct, but every get takes 2 ms (a pure-Python get takes microseconds)
        return super().get(key, namespace)


class HangsInNativeCode(TinyMap):
    def put_and_get_old(self, key, namespace, state):
        if len(self.live) >= 2:  # a C loop that holds the GIL: catastrophic backtracking
            re.match(r"(a+)+$", "a" * 64 + "b")
        return super().put_and_get_old(key, namespace, state)


# ---------------------------------------------------------------- races


class RacySnapshot(TinyMap):
    """Its snapshot is copied while the last write may still be in flight: whether the copy
    misses the entry written last depends on the run (here a coin its own random.Random(),
    seeded by the operating system, tosses once per map: one map in three loses it)."""

    def __init__(self, capacity=128, state_copier=copy.deepcopy):
        super().__init__(capacity, state_copier)
        self.loses_last_write = random.Random().random() < 1 / 3
        self.last = None

    def put(self, key, namespace, state):
        super().put(key, namespace, state)
        self.last = (key, namespace)

    def snapshot(self):
        snap = super().snapshot()
        if self.loses_last_write and self.last in self.data:
            snap.__class__ = _CountedSnapshot
            snap.count = len(snap.items)  # counted before the copy...
            snap.items = [(k, n, s) for k, n, s in snap.items if (k, n) != self.last]  # ...copied after
        return snap


class _CountedSnapshot(TinySnapshot):
    def __len__(self):
        return self.count


# ---------------------------------------------------- hostile states


class _EqRaises(list):
    def __eq__(self, other):
        raise TypeError("cannot compare")

    __hash__ = None


class _ReprRaises(list):
    def __repr__(self):
        raise RuntimeError("no repr")


class EqRaisesState(TinyMap):
    def _fresh(self, slot):
        state = super()._fresh(slot)
        return _EqRaises(state) if self.live and isinstance(state, list) else state


class ReprRaisesState(TinyMap):
    def _fresh(self, slot):
        state = super()._fresh(slot)
        if self.live and isinstance(state, list):
            return _ReprRaises(state + [99])  # wrong content, and unprintable
        return state


# ---------------------------------------------- ending the process, BaseExceptions


class ExitsInMethod(TinyMap):
    def remove(self, key, namespace):
        sys.exit(0)  # "nothing found" to a CI gate, if the checker shares the process


class OsExitInMethod(TinyMap):
    def remove(self, key, namespace):
        os._exit(0)  # no exception, no cleanup: the process is gone


class RaisesSystemExit(TinyMap):
    def contains_key(self, key, namespace):
        if self.live:
            raise SystemExit("contains_key under a snapshot is not implemented")
        return super().contains_key(key, namespace)


class RaisesKeyboardInterrupt(TinyMap):
    def put_and_get_old(self, key, namespace, state):
        raise KeyboardInterrupt  # the map's, not the user's Ctrl-C


class RaisesGeneratorExit(TinyMap):
    def size_of_namespace(self, namespace):
        raise GeneratorExit


class WritesToPipes(TinyMap):
    def remove(self, key, namespace):
        for fd in range(3, 64):  # every descriptor it finds open, the pipes to cowcheck included
            try:
                os.write(fd, b"\xff" * 16)
            except OSError:
                pass
        return super().remove(key, namespace)


def exits_in_factory(capacity=128, state_copier=copy.deepcopy):
    sys.exit(0)


def os_exit_in_factory(capacity=128, state_copier=copy.deepcopy):
    os._exit(0)


# ---------------------------------------------- returned values that misbehave


class _Entry(tuple):
    def __iter__(self):
        raise RuntimeError("an entry cannot be unpacked")


class _EntriesIterator(TinyIterator):
    def __next__(self):
        return _Entry(super().__next__())


class EntryIterRaises(TinyMap):
    """Live iteration hands out entries whose __iter__ raises (so they cannot be unpacked)."""

    def __iter__(self):
        return _EntriesIterator(self)


class _EndlessList(list):
    """A wrong state whose __iter__ never ends (and whose == says nothing is equal)."""

    def __iter__(self):
        while True:
            yield 0

    def __eq__(self, other):
        return False

    __hash__ = None


class EndlessStateIteration(TinyMap):
    """Under a snapshot, get hands out a list whose __iter__ never ends."""

    def _fresh(self, slot):
        state = super()._fresh(slot)
        return _EndlessList(state) if self.live and isinstance(state, list) else state


class _ClassRaises(list):
    @property
    def __class__(self):
        raise RuntimeError("no class")

    def __eq__(self, other):
        return False

    __hash__ = None


class ClassRaisesState(TinyMap):
    """Under a snapshot, get hands out a list whose __class__ raises (isinstance() asks it)."""

    def _fresh(self, slot):
        state = super()._fresh(slot)
        return _ClassRaises(state) if self.live and isinstance(state, list) else state


class HugeState(TinyMap):
    """Under a snapshot, get hands out a new state of 14 million ints (112 MB) each time."""

    def get(self, key, namespace):
        state = super().get(key, namespace)
        return [0] * 14_000_000 if self.live and state is not None else state


class HugeText(TinyMap):
    """Under a snapshot, get hands out a state holding one string of 70 million characters."""

    def get(self, key, namespace):
        state = super().get(key, namespace)
        return ["x" * 70_000_000] if self.live and state is not None else state


class _ViewLenRaises:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        raise OverflowError("a view that cannot count")


class ViewLenRaises(TinyMap):
    """snapshot.iterate(fn) returns a view whose __len__ raises."""

    def snapshot(self):
        snap = super().snapshot()
        iterate = snap.iterate
        snap.iterate = lambda transformer=None: _ViewLenRaises(list(iterate(transformer)))
        return snap


# ------------------------------------------------------- introspection


class TupleIntrospection(TinyMap):
    def introspect(self):
        return (len(self.data), self.version)  # another shape of view: correct map, black-box


class _MethodView:
    """The reference map's view with ``is_rehashing`` as a method."""

    def __init__(self, m):
        self._m = m

    def is_rehashing(self):
        return self._m.is_rehashing

    def __getattr__(self, name):
        return getattr(self._m, name)


def _reference():
    from cowcheck.reference import CopyOnWriteStateMap  # only to have a white-box view of another shape

    return CopyOnWriteStateMap


def is_rehashing_as_method(capacity=128, state_copier=copy.deepcopy):
    m = _reference()(capacity, state_copier)
    m.introspect = lambda: _MethodView(m)
    return m


# ---------------------------------------------------------- contract levels


class _EagerSnapshot(TinySnapshot):
    """A deep copy of every state, taken when the snapshot is."""


class EagerCopy(TinyMap):
    """Full isolation, another design than Flink's: the snapshot deep-copies every state, so the
    map never copies on access and always hands out its own objects (correct under the isolation
    contract; not Flink's copy discipline, P6)."""

    def _fresh(self, slot):
        return slot[0]

    def _old(self, slot):
        return slot[0]

    def snapshot(self):
        self.version += 1
        self.live.add(self.version)
        items = [(k, n, copy.deepcopy(slot[0])) for (k, n), slot in self.data.items()]
        return _EagerSnapshot(self, self.version, items)


class ShallowSnapshot(TinyMap):
    """Wrong under every contract: the snapshot keeps references to the states and the map never
    copies on access, so a caller changing a state it was handed in place changes the snapshot."""

    def _fresh(self, slot):
        return slot[0]

    def _old(self, slot):
        return slot[0]


# ---------------------------------------------------------- arguments


def only_capacity_128(capacity=128, state_copier=copy.deepcopy):
    if capacity != 128:
        raise ValueError(f"this map only supports capacity 128, not {capacity}")
    return TinyMap(capacity, state_copier)


def _factory(cls):
    return lambda capacity=128, state_copier=copy.deepcopy: cls(capacity, state_copier)


lies_released = _factory(LiesReleased)
lies_length = _factory(LiesLength)
lies_version = _factory(LiesVersion)
writes_key_first = _factory(WritesKeyFirst)
release_not_idempotent = _factory(ReleaseNotIdempotent)
writes_short_count = _factory(WritesShortCount)
forgets_release = _factory(ForgetsRelease)
tuple_states = _factory(TupleStates)
keys_as_list = _factory(KeysAsList)
flags_as_methods = _factory(FlagsAsMethods)
odd_exception = _factory(OddException)
snapshot_len_raises = _factory(SnapshotLenRaises)
hangs_in_get = _factory(HangsInGet)
endless_snapshot_iteration = _factory(EndlessSnapshotIteration)
hangs_in_native_code = _factory(HangsInNativeCode)
slow = _factory(Slow)
racy_snapshot = _factory(RacySnapshot)
eq_raises_state = _factory(EqRaisesState)
repr_raises_state = _factory(ReprRaisesState)
tuple_introspection = _factory(TupleIntrospection)
exits_in_method = _factory(ExitsInMethod)
os_exit_in_method = _factory(OsExitInMethod)
writes_to_pipes = _factory(WritesToPipes)
raises_system_exit = _factory(RaisesSystemExit)
raises_keyboard_interrupt = _factory(RaisesKeyboardInterrupt)
raises_generator_exit = _factory(RaisesGeneratorExit)
entry_iter_raises = _factory(EntryIterRaises)
view_len_raises = _factory(ViewLenRaises)
endless_state_iteration = _factory(EndlessStateIteration)
class_raises_state = _factory(ClassRaisesState)
huge_state = _factory(HugeState)
huge_text = _factory(HugeText)
eager_copy = _factory(EagerCopy)
shallow_snapshot = _factory(ShallowSnapshot)

ZOO: dict[str, Verdict] = {
    # wrong: exit 1, for the right reason
    "lies-released": Verdict("lies_released", 1, "DIVERGENCE", "P3",
                             what="a fresh snapshot says released=True and iterates nothing"),
    "lies-length": Verdict("lies_length", 1, "DIVERGENCE", "P4", what="len() counts one more while a snapshot is live"),
    "lies-version": Verdict("lies_version", 1, "DIVERGENCE", "P5", what="every snapshot says version 1"),
    "forgets-release": Verdict("forgets_release", 1, "DIVERGENCE", "P3", what="release() leaves released False"),
    "release-not-idempotent": Verdict("release_not_idempotent", 1, "CRASH", "P7",
                                      what="a second release() raises"),
    "writes-key-first": Verdict("writes_key_first", 1, "DIVERGENCE", "P2",
                                what="write_state writes key before namespace"),
    "writes-short-count": Verdict("writes_short_count", 1, "DIVERGENCE", "P2",
                                  what="write_state's count leaves out the last entry"),
    "tuple-states": Verdict("tuple_states", 1, "DIVERGENCE", "P1", what="get hands out a tuple copy of the list"),
    "odd-exception": Verdict("odd_exception", 1, "CRASH", "P7",
                             what="a modified map's iterator raises ValueError, not a RuntimeError"),
    "snapshot-len-raises": Verdict("snapshot_len_raises", 1, "CRASH", "P7", what="len(snapshot) raises"),
    "hangs-in-get": Verdict("hangs_in_get", 1, "TIMEOUT", "time-limit", ("--step-time-limit", "1"),
                            what="get loops forever while two snapshots are live"),
    "endless-snapshot-iteration": Verdict("endless_snapshot_iteration", 1, "DIVERGENCE", "P2",
                                          what="a snapshot's iterator goes round forever"),
    "eq-raises-state": Verdict("eq_raises_state", 1, "DIVERGENCE", "P1",
                               what="under a snapshot, get hands out a list whose __eq__ raises"),
    "repr-raises-state": Verdict("repr_raises_state", 1, "DIVERGENCE", "P1",
                                 what="under a snapshot, get hands out a wrong list whose __repr__ raises"),
    "entry-iter-raises": Verdict("entry_iter_raises", 1, "DIVERGENCE", "P1",
                                 what="live iteration hands out entries whose __iter__ raises"),
    "view-len-raises": Verdict("view_len_raises", 1, "CRASH", "P7",
                               what="snapshot.iterate(fn) returns a view whose __len__ raises"),
    "endless-state-iteration": Verdict("endless_state_iteration", 1, "DIVERGENCE", "P1", args=("--in-process",),
                                       what="under a snapshot, get hands out a list whose __iter__ never ends, in "
                                            "cowcheck's process (describing it read it for ever: exit 3, 3.3 GB)"),
    "class-raises-state": Verdict("class_raises_state", 1, "DIVERGENCE", "P1", args=("--in-process",),
                                  what="under a snapshot, get hands out a list whose __class__ raises, in cowcheck's "
                                       "process (was exit 3)"),
    "huge-state": Verdict("huge_state", 1, "DIVERGENCE", "P1", args=("--replays", "2", "--shrink-seconds", "10"),
                          prints="map returned [0, 0, 0, 0, 0, 0, ...] (list of 14,000,000 items)",
                          what="under a snapshot, get hands out 14 million ints: a list that long crosses between "
                               "the processes as its length and beginning, and differs from the model's (it "
                               "was CRASH worker-protocol: marshalled whole and refused, each time)"),
    "huge-text": Verdict("huge_text", 1, "CRASH", "worker-protocol", args=("--replays", "2", "--shrink-seconds", "10"),
                         what="under a snapshot, get hands out a string of 70 million characters: more than a "
                              "message between the processes may hold (64 MiB)"),
    # ending the process, BaseExceptions: the implementation's failure, never a pass, never exit 3
    "exits-in-method": Verdict("exits_in_method", 1, "CRASH", "P7", what="remove calls sys.exit(0)"),
    "os-exit-in-method": Verdict("os_exit_in_method", 1, "CRASH", "worker-exit",
                                 what="remove calls os._exit(0) (its process ends)"),
    "writes-to-pipes": Verdict("writes_to_pipes", 1, "CRASH", "worker-protocol",
                               what="remove writes bytes to every file descriptor it finds open"),
    "exits-in-factory": Verdict("exits_in_factory", 1, "CRASH", "construction", steps=0,
                                what="the factory calls sys.exit(0)"),
    "os-exit-in-factory": Verdict("os_exit_in_factory", 1, "CRASH", "worker-exit", steps=0,
                                  what="the factory calls os._exit(0)"),
    "raises-system-exit": Verdict("raises_system_exit", 1, "CRASH", "P7",
                                  what='contains_key under a snapshot raises SystemExit("...")'),
    "raises-keyboard-interrupt": Verdict("raises_keyboard_interrupt", 1, "CRASH", "P7",
                                         what="put_and_get_old raises KeyboardInterrupt"),
    "raises-generator-exit": Verdict("raises_generator_exit", 1, "CRASH", "P7",
                                     what="size_of_namespace raises GeneratorExit"),
    "patches-cowcheck": Verdict("make_map", 1, "DIVERGENCE", "P1", module="patches_cowcheck",
                                what="get always returns None, and the module patches cowcheck's harness at import "
                                     "so that no check can fail"),
    "racy-snapshot": Verdict("racy_snapshot", 1, "DIVERGENCE", "P2", nondeterministic=True,
                             what="in one map of three (a race: its own unseeded random.Random()), a snapshot "
                                  "misses the entry written last: fails, marked nondeterministic"),
    # odd but correct: exit 0
    "keys-as-list": Verdict("keys_as_list", 0, what="keys() returns a list instead of an iterator"),
    "slow": Verdict("slow", 0, what="every get sleeps 2 ms: slow, not stuck"),
    "flags-as-methods": Verdict("flags_as_methods", 0, what="snapshot.released() and .version() are methods"),
    "tuple-introspection": Verdict("tuple_introspection", 0, says="checked black-box",
                                   what="introspect() returns a tuple: checked black-box, with a notice"),
    "is-rehashing-as-method": Verdict("is_rehashing_as_method", 0, args=("--white-box", "--in-process"),
                                      what="a white-box view whose is_rehashing is a method (white-box needs the "
                                           "map in cowcheck's process)"),
    "is-rehashing-as-method-apart": Verdict("is_rehashing_as_method", 0, says="--in-process",
                                            what="the same map in its own process: checked black-box, with a "
                                                 "notice naming --in-process"),
    "only-capacity-128": Verdict("only_capacity_128", 0, args=("--capacity", "128"),
                                 what="a factory that only accepts capacity 128, given --capacity 128"),
    # bad usage: exit 2, one line naming what to change
    "only-capacity-128-default": Verdict("only_capacity_128", 2, says="--capacity",
                                         what="the same factory with the default capacity 4"),
    "tuple-introspection-white-box": Verdict("tuple_introspection", 2, args=("--white-box", "--in-process"),
                                             says="primary_table",
                                             what="--white-box on a view without the contract's fields"),
    "white-box-apart": Verdict("is_rehashing_as_method", 2, args=("--white-box",), says="--in-process",
                               what="--white-box on a map in its own process (its view is not read there)"),
    # contract levels: full isolation by eager copies is not Flink's copy discipline
    "eager-copy": Verdict("eager_copy", 1, "DIVERGENCE", "P6", prints="--contract isolation",
                          what="snapshots deep-copy every state; states handed out are the map's own: fails "
                               "Flink's copy discipline, and the message names the isolation contract"),
    "eager-copy-isolation": Verdict("eager_copy", 0, args=("--contract", "isolation"),
                                    what="the same map passes the isolation contract"),
    "shallow-snapshot": Verdict("shallow_snapshot", 1, "DIVERGENCE", "P6", prints="instead of",
                                what="snapshots share the states and nothing is ever copied: P6 under flink, "
                                     "with the harm (what the snapshot would read) in the message"),
    # a map for int and str keys and namespaces only (primitive.py): judged on the families it takes
    "primitive-keys": Verdict("make_map", 0, module="primitive", says="does not take key family tuple",
                              what="hashes int and str keys and namespaces itself, TypeError for the others: "
                                   "passes, tuple keys and void, window namespaces left out with a notice (was "
                                   "CRASH P7 at the first Tuple2 key, whatever the map)"),
    "primitive-identity-keys": Verdict("identity_keys", 1, "DIVERGENCE", "P1", module="primitive",
                                       what="the same map comparing keys with `is`"),
    "primitive-copies-target-only": Verdict("copies_target_only", 1, "DIVERGENCE", "P2", module="primitive",
                                            what="the same map copying only the entry it writes, not the entries "
                                                 "before it in its chain that a snapshot shares"),
    "primitive-version-not-bumped": Verdict("version_not_bumped", 1, "DIVERGENCE", "P5", module="primitive",
                                            what="the same map whose snapshot takes the current version"),
    "primitive-no-keys": Verdict("no_keys", 2, module="primitive", says="takes no key or namespace family",
                                 what="a map that raises TypeError for every key: bad usage, one line"),
    "shallow-snapshot-isolation": Verdict("shallow_snapshot", 1, "DIVERGENCE", "P2", args=("--contract", "isolation"),
                                          prints="differs from its frozen copy",
                                          what="under isolation it fails with the snapshot's changed content"),
}
