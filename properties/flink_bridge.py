"""Apache Flink 2.3.0's own CopyOnWriteStateMap behind the SPEC §15 API (``--impl flink``).

The real Java class runs in-process through JPype; a small helper of ours
(``properties/java/cowcheck/bridge/*.java``) is compiled with ``javac`` on first
use into ``~/.cache/cowcheck/java/<hash of the sources and the Flink jar>/`` and
put on the class path next to ``flink-dist-2.3.0.jar`` from the
``apache-flink-libraries`` wheel (install with ``pip install 'cowcheck[flink]'``).

>>> m = FlinkStateMap()                      # doctest: +SKIP
>>> m.put("k", 0, [1]); s = m.snapshot()     # doctest: +SKIP
>>> m.get("k", 0).append(2)                  # doctest: +SKIP
>>> list(s), m.get("k", 0)                   # doctest: +SKIP
([('k', 0, [1])], [1, 2])

What crosses the boundary:

- keys and namespaces: ``int`` in int32 range as ``java.lang.Integer``, other
  ints as ``Long``, ``str`` as ``String``, ``bool`` as ``Boolean`` (the types
  whose ``hashCode`` SPEC §2 reproduces; anything else is a TypeError);
- states: ``None`` or lists of int32, as ``java.util.ArrayList<Integer>``
  through Flink's ``ListSerializer(IntSerializer)``, whose ``copy`` makes a new
  list (so copy-on-write is visible; ``state_copier`` is not used: Flink copies
  with its serializer, which for these states equals ``copy.deepcopy``).

State identity (the harness checks ``is``): every Java state object that
reaches Python gets an id (Java side, by identity, never reused) and exactly
one Python *twin* list. The same Java object therefore always comes back as
the same Python object, and a fresh Java copy (made by Flink's serializer) as
a fresh Python list. A list handed to ``put`` becomes the twin of the new Java
list made from it, so ``get`` returns the caller's very object. Python owns
the content: callers mutate twins in place (``m.get(k, n).append(1)``), and
the map reads a state's content only through its serializer, so the helper's
serializer asks Python for the twin's current content right before every
``copy`` and ``serialize`` (one callback per copy). Twins of states that
neither the map nor a snapshot still held by Python can reach are forgotten
from time to time (``prune``), on both sides.

White box: ``introspect()`` returns a :class:`FlinkView` built by reflection
(tables, sizes, rehash index, versions, threshold, mod count, entries with
their versions and hash). Every Java entry has one :class:`EntryMirror`,
updated in place at each ``introspect()``, so entry identity holds across
views, as ``reference.invariants.SnapshotGuard`` (I8/I9) needs.

Capacity: Flink's map always starts at 128 (``DEFAULT_CAPACITY``; the sized
constructor is private), so the factory accepts ``capacity=128`` only.

One JVM per process: it starts on first use (creating a map, running a
batch), never at import or ``resolve("flink")``, so a campaign driver can
resolve the spec and fork executors that each start their own JVM. A JVM
cannot be used across ``fork``: using the bridge in a child forked after the
parent started the JVM is a :class:`FlinkUnavailableError`.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs

from properties.cli import UsageError
from properties.impls import Implementation, UnknownImplementationError, register_resolver
from properties.parity import Raised
from properties.program import SNAPSHOT_TRANSFORMERS, Step
from reference.errors import (
    ConcurrentModificationError,
    ForeignSnapshotError,
    IllegalStateError,
    RehashInProgressError,
)
from reference.snapshot import SnapshotView

__all__ = [
    "FLINK_CAPACITY",
    "BATCH_OPS",
    "DETAILS",
    "FlinkUnavailableError",
    "FlinkCapacityError",
    "FlinkStateMap",
    "FlinkSnapshot",
    "FlinkView",
    "EntryMirror",
    "JvmInfo",
    "FlinkImplementation",
    "available",
    "jvm",
    "flink_serialize",
    "flink_deserialize",
    "run_batch",
    "resolve_flink",
]

FLINK_CAPACITY = 128
_FLINK_JAR = "flink-dist-2.3.0.jar"
_JAVA_SOURCES = Path(__file__).with_name("java")
_HELPER_CLASS = "cowcheck.bridge.MapHandle"

# Op codes of Batch.java, in its order.
BATCH_OPS = ("put", "put_and_get_old", "get", "get_mutate", "contains_key", "remove", "remove_and_get_old",
             "transform", "rehash", "snapshot", "read_snapshot", "read_snapshot_transformed", "release",
             "iterate", "iterate_modify", "keys", "size_of_namespace", "visit")
_OP_CODE = {op: i for i, op in enumerate(BATCH_OPS)}
_TRANSFORMER_CODE = {"drop_even": 0, "append_marker": 1}
DETAILS = {"results": 0, "summary": 1, "final": 2, "every_step": 3}  # Batch.DETAIL_*

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_PRUNE_AT_LEAST = 4096


class FlinkUnavailableError(RuntimeError):
    """The Flink bridge cannot run here; ``.reason`` says why and how to fix it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Flink bridge unavailable: {reason}")
        self.reason = reason


class FlinkCapacityError(UsageError, ValueError):
    """A capacity other than 128 for Flink's map (a bad argument: exit 2 on the command line)."""

    def __init__(self, capacity: Any) -> None:
        super().__init__(
            f"Flink's CopyOnWriteStateMap always starts with capacity {FLINK_CAPACITY} (DEFAULT_CAPACITY; its "
            f"sized constructor is private), got capacity={capacity!r}: use --capacity {FLINK_CAPACITY}")
        self.capacity = capacity


# ------------------------------------------------------------------ the JVM


@attrs.frozen
class JvmInfo:
    """How the JVM of this process came up: seconds to compile the helper (0 if
    cached), seconds to start the JVM and load the classes, the class path."""

    pid: int
    compile_seconds: float
    start_seconds: float
    classpath: tuple
    java_version: str


_JVM: JvmInfo | None = None


def _flink_lib() -> Path:
    override = os.environ.get("COWCHECK_FLINK_LIB")
    if override:
        candidates = [Path(override)]
    else:
        spec = importlib.util.find_spec("pyflink")
        candidates = [Path(p) / "lib" for p in (spec.submodule_search_locations or [])] if spec else []
    for lib in candidates:
        if (lib / _FLINK_JAR).is_file():
            return lib
    raise FlinkUnavailableError(
        f"{_FLINK_JAR} not found (looked in {', '.join(map(str, candidates)) or 'no pyflink package'}); "
        f"install it with: pip install 'cowcheck[flink]' (or set COWCHECK_FLINK_LIB to its directory)")


def available() -> str | None:
    """None if the bridge can start here (jpype1 and the Flink jar are installed),
    else the reason. Cheap: starts no JVM and compiles nothing."""
    if importlib.util.find_spec("jpype") is None:
        return "jpype1 is not installed: pip install 'cowcheck[flink]'"
    try:
        _flink_lib()
    except FlinkUnavailableError as exc:
        return exc.reason
    return None


def _cache_root() -> Path:
    override = os.environ.get("COWCHECK_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cowcheck"


def _compiled_helper(flink_jar: Path) -> tuple[Path, float]:
    """The directory with our compiled helper classes, compiling them on first use;
    ``(directory, seconds spent compiling)``. Keyed by a hash of the sources and of
    the jar's name and size, so an edit or another Flink build recompiles."""
    sources = sorted(_JAVA_SOURCES.rglob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(str(source.relative_to(_JAVA_SOURCES)).encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update(f"{flink_jar.name}:{flink_jar.stat().st_size}".encode())
    target = _cache_root() / "java" / digest.hexdigest()[:20]
    if (target / "COMPLETE").is_file():
        return target, 0.0
    javac = shutil.which("javac")
    if javac is None:
        raise FlinkUnavailableError("javac not found on PATH: the bridge compiles its Java helper on first use "
                                    "(install a JDK, 11 or newer)")
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        result = subprocess.run([javac, "--release", "11", "-nowarn", "-encoding", "UTF-8", "-cp", str(flink_jar),
                                 "-d", str(scratch)] + [str(s) for s in sources],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise FlinkUnavailableError(f"javac failed on {_JAVA_SOURCES}:\n{result.stderr.strip()}")
        (scratch / "COMPLETE").write_text("")
        try:
            os.rename(scratch, target)  # atomic; another process may have won the race
        except OSError:
            if not (target / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target, time.perf_counter() - started


def jvm() -> JvmInfo:
    """Start the JVM of this process (once) with Flink and our helper on the class path."""
    global _JVM
    if _JVM is not None:
        if _JVM.pid != os.getpid():
            raise FlinkUnavailableError(
                f"the JVM was started in process {_JVM.pid}, which then forked this process {os.getpid()}; a JVM "
                f"does not survive fork: create Flink maps only in the process that uses them (each campaign "
                f"executor starts its own JVM on first use)")
        return _JVM
    reason = available()
    if reason is not None:
        raise FlinkUnavailableError(reason)
    import jpype

    lib = _flink_lib()
    flink_jar = lib / _FLINK_JAR
    classes, compile_seconds = _compiled_helper(flink_jar)
    # log4j next to flink-dist silences SLF4J's "no provider" warnings.
    classpath = (str(flink_jar), *sorted(str(p) for p in lib.glob("log4j-*.jar")), str(classes))
    started = time.perf_counter()
    if jpype.isJVMStarted():
        raise FlinkUnavailableError("a JVM is already running in this process, started without Flink and the "
                                    "cowcheck helper on its class path (JPype allows one JVM per process)")
    jpype.startJVM(classpath=list(classpath), convertStrings=False)
    jpype.JClass(_HELPER_CLASS)  # load (and link) the helper and Flink's map now, not in the first operation
    jpype.JClass("cowcheck.bridge.Batch")
    version = str(jpype.java.lang.System.getProperty("java.version"))
    _JVM = JvmInfo(os.getpid(), compile_seconds, time.perf_counter() - started, classpath, version)
    _Java.load()
    return _JVM


class _Java:
    """Java classes and converters, bound once the JVM runs."""

    jpype: Any = None
    Integer: Any = None
    Long: Any = None
    Boolean: Any = None
    JString: Any = None
    int_array: Any = None
    object_array: Any = None
    MapHandle: Any = None
    Batch: Any = None
    Serializers: Any = None
    JException: Any = None
    CME: Any = None
    IllegalState: Any = None
    IllegalArgument: Any = None
    NullPointer: Any = None
    PythonSide: Any = None

    @classmethod
    def load(cls) -> None:
        import jpype

        cls.jpype = jpype
        cls.Integer = jpype.JClass("java.lang.Integer")
        cls.Long = jpype.JClass("java.lang.Long")
        cls.Boolean = jpype.JClass("java.lang.Boolean")
        cls.JString = jpype.JString
        cls.int_array = jpype.JArray(jpype.JInt)
        cls.object_array = jpype.JArray(jpype.JObject)
        cls.MapHandle = jpype.JClass(_HELPER_CLASS)
        cls.Batch = jpype.JClass("cowcheck.bridge.Batch")
        cls.Serializers = jpype.JClass("cowcheck.bridge.Serializers")
        cls.JException = jpype.JException
        cls.CME = jpype.JClass("java.util.ConcurrentModificationException")
        cls.IllegalState = jpype.JClass("java.lang.IllegalStateException")
        cls.IllegalArgument = jpype.JClass("java.lang.IllegalArgumentException")
        cls.NullPointer = jpype.JClass("java.lang.NullPointerException")
        cls.PythonSide = _python_side_class(jpype)


# ---------------------------------------------------------------- conversions

_JAVA_VALUES: dict = {}


def _java_value(value):
    """The Java object for a key or namespace (cached: keys repeat)."""
    cache_key = (type(value), value)
    try:
        return _JAVA_VALUES[cache_key]
    except KeyError:
        pass
    except TypeError:
        raise TypeError(f"Flink bridge: keys and namespaces must be int, str or bool, got "
                        f"{type(value).__name__} {value!r}") from None
    t = type(value)
    if t is int:
        if _INT_MIN <= value <= _INT_MAX:
            java = _Java.Integer.valueOf(value)
        elif _LONG_MIN <= value <= _LONG_MAX:
            java = _Java.Long.valueOf(value)
        else:
            raise TypeError(f"Flink bridge: key or namespace {value} does not fit a Java long")
    elif t is str:
        java = _java_string(value)
    elif t is bool:
        java = _Java.Boolean.valueOf(value)
    elif value is None:
        java = None  # Flink decides (NullPointerException -> TypeError)
    else:
        raise TypeError(f"Flink bridge: keys and namespaces must be int, str or bool, got "
                        f"{type(value).__name__} {value!r}")
    if len(_JAVA_VALUES) > 100_000:
        _JAVA_VALUES.clear()
    _JAVA_VALUES[cache_key] = java
    return java


def _java_string(value: str):
    """A java.lang.String with the same UTF-16 code units (lone surrogates included,
    which JPype's UTF-8 conversion rejects)."""
    try:
        return _Java.JString(value)
    except UnicodeEncodeError:
        units = value.encode("utf-16-be", "surrogatepass")
        chars = [(units[i] << 8) | units[i + 1] for i in range(0, len(units), 2)]
        return _Java.JString(_Java.jpype.JArray(_Java.jpype.JChar)([chr(c) for c in chars]))


def _python_string(java_string) -> str:
    try:
        return str(java_string)
    except UnicodeDecodeError:  # lone surrogates: go through the UTF-16 code units
        return b"".join(ord(c).to_bytes(2, "big") for c in java_string.toCharArray()).decode("utf-16-be",
                                                                                           "surrogatepass")


def _ints(java_int_array) -> list:
    if len(java_int_array) == 0:
        return []
    return memoryview(java_int_array).cast("B").cast("i").tolist()


def _int_array(state) -> Any:
    if not isinstance(state, list):
        raise TypeError(f"Flink bridge: states must be lists of int32 (or None), got {type(state).__name__} "
                        f"{state!r:.60}")
    try:
        if any(type(x) is not int for x in state):
            raise TypeError
        return _Java.int_array(state)
    except (TypeError, OverflowError):
        raise TypeError(f"Flink bridge: states must be lists of int32 (or None), got {state!r:.60}") from None


def _json(answer):
    """A JSON answer of the helper (Json.java) as Python data; ``{"raised": name}`` -> Raised."""
    return json.loads(str(answer), object_hook=_raised)


def _raised(obj: dict):
    return Raised(obj["raised"])


class _Reader:
    """Reads a fixed-layout white-box answer (``Encoded``: ints, and the keys and
    namespaces of new entries as JSON, in record order)."""

    __slots__ = ("data", "pos", "keys")

    def __init__(self, encoded) -> None:
        self.data = _ints(encoded.data)
        self.pos = 0
        self.keys = iter(json.loads(str(encoded.keys)))

    def raw(self) -> int:
        v = self.data[self.pos]
        self.pos += 1
        return v

    def key(self):
        return next(self.keys)


def _translate(exc):
    """The Python exception for a Java exception from Flink (SPEC §15 / reference.errors)."""
    message = str(exc.getMessage()) if exc.getMessage() is not None else ""
    if isinstance(exc, _Java.CME):
        return ConcurrentModificationError(-1, -1)
    if isinstance(exc, _Java.IllegalState):
        if "rehash in progress" in message:
            return RehashInProgressError()
        return IllegalStateError(message)
    if isinstance(exc, _Java.NullPointer):
        return TypeError(f"Flink: NullPointerException ({message or 'null key, namespace or state'})")
    if isinstance(exc, _Java.IllegalArgument):
        return ValueError(message)
    return exc


def _python_side_class(jpype):
    @jpype.JImplements("cowcheck.bridge.PythonSide")
    class PythonSide:
        """Callbacks of one map; a weak reference, so Java does not keep the map alive."""

        def __init__(self, owner) -> None:
            self.owner = weakref.ref(owner)

        @jpype.JOverride
        def twinContent(self, state_id):
            return _int_array(self.owner()._twins[state_id])

        @jpype.JOverride
        def transform(self, previous_code):
            return self.owner()._run_pending(previous_code)

        @jpype.JOverride
        def filterOrTransform(self, state_code):
            return self.owner()._run_pending(state_code)

    return PythonSide


# ------------------------------------------------------------------- mirror


class EntryMirror:
    """A Python view of one Flink ``StateMapEntry``: one object per Java entry,
    updated in place by every ``introspect()`` (so ``is`` compares entries)."""

    __slots__ = ("key", "namespace", "state", "hash", "next", "entry_version", "state_version")

    def __init__(self, key, namespace) -> None:
        self.key = key
        self.namespace = namespace
        self.state = None
        self.hash = 0
        self.next = None
        self.entry_version = 0
        self.state_version = 0

    def __repr__(self) -> str:
        return (f"EntryMirror({self.key!r}, {self.namespace!r}, {self.state!r}, hash={self.hash}, "
                f"ev={self.entry_version}, sv={self.state_version})")


@attrs.define
class FlinkView:
    """The white-box view of ``reference.invariants`` for a Flink map, read by
    reflection at one moment (``introspect()``); tables hold EntryMirrors."""

    primary_table: list
    incremental_rehash_table: list
    is_rehashing: bool
    primary_table_size: int
    incremental_rehash_table_size: int
    rehash_index: int
    threshold: int
    mod_count: int
    state_map_version: int
    highest_required_snapshot_version: int
    snapshot_versions: set


# --------------------------------------------------------------------- map


class FlinkStateMap:
    """Flink 2.3.0's ``CopyOnWriteStateMap`` speaking SPEC §15; see the module docstring.

    ``capacity`` must be 128 (FlinkCapacityError otherwise); ``state_copier`` is
    accepted for the factory protocol and unused (Flink copies with its serializer).
    """

    def __init__(self, capacity: int = FLINK_CAPACITY, state_copier: Callable[[Any], Any] = copy.deepcopy) -> None:
        if capacity != FLINK_CAPACITY or type(capacity) is not int:
            raise FlinkCapacityError(capacity)
        jvm()
        self._callbacks = _Java.PythonSide(self)
        self._handle = _Java.MapHandle(self._callbacks)
        self._twins: dict[int, list] = {}  # state id -> the Python list that is its twin
        self._ids: dict[int, int] = {}  # id(twin) -> state id
        self._mirrors: dict[int, EntryMirror] = {}  # entry id -> mirror
        self._snapshots: weakref.WeakSet = weakref.WeakSet()  # snapshots Python still holds
        self._cursors: weakref.WeakSet = weakref.WeakSet()  # unfinished iterators and visitors
        self._prune_at = _PRUNE_AT_LEAST
        # The transform function or snapshot transformer of the Java call running now; an
        # exception it raises comes back through Java unchanged (JPype).
        self._pending: Callable | None = None

    # ------------------------------------------------------------- twins

    def _twin(self, code: int):
        """The Python object for a state code (see PythonSide.java)."""
        if code > 0:
            return self._twins[code]
        if code == 0:
            return None
        state_id = -code
        twin = _ints(self._handle.content(state_id))
        self._twins[state_id] = twin
        self._ids[id(twin)] = state_id
        return twin

    def _state_id(self, state) -> int:
        """The Java state for a Python state: its own if it is a twin, else a new one."""
        if state is None:
            return 0
        state_id = self._ids.get(id(state))
        if state_id is not None:
            return state_id
        state_id = self._handle.adopt(_int_array(state))
        self._twins[state_id] = state
        self._ids[id(state)] = state_id
        return state_id

    def _maybe_prune(self) -> None:
        """Forget twins and mirrors nothing can reach any more (between operations only,
        and not while an iterator is open: it may still return what it read ahead)."""
        if len(self._twins) + len(self._mirrors) < self._prune_at or len(self._cursors):
            return
        held = _Java.object_array([s._snapshot for s in self._snapshots])
        dropped_states, dropped_entries = self._handle.prune(held)
        for state_id in _ints(dropped_states):
            del self._ids[id(self._twins.pop(state_id))]
        for entry_id in _ints(dropped_entries):
            self._mirrors.pop(entry_id, None)
        self._prune_at = max(_PRUNE_AT_LEAST, 2 * (len(self._twins) + len(self._mirrors)))

    # -------------------------------------------------------- keyed ops

    def get(self, key, namespace):
        self._maybe_prune()
        try:
            code = self._handle.get(_java_value(key), _java_value(namespace))
        except _Java.JException as exc:
            raise _translate(exc) from None
        return self._twin(code) if code else None

    def contains_key(self, key, namespace) -> bool:
        try:
            return bool(self._handle.containsKey(_java_value(key), _java_value(namespace)))
        except _Java.JException as exc:
            raise _translate(exc) from None

    def put(self, key, namespace, state) -> None:
        self._maybe_prune()
        state_id = self._state_id(state)
        try:
            self._handle.put(_java_value(key), _java_value(namespace), state_id)
        except _Java.JException as exc:
            raise _translate(exc) from None

    def put_and_get_old(self, key, namespace, state):
        self._maybe_prune()
        state_id = self._state_id(state)
        try:
            code = self._handle.putAndGetOld(_java_value(key), _java_value(namespace), state_id)
        except _Java.JException as exc:
            raise _translate(exc) from None
        return self._twin(code)

    def remove(self, key, namespace) -> None:
        try:
            self._handle.remove(_java_value(key), _java_value(namespace))
        except _Java.JException as exc:
            raise _translate(exc) from None

    def remove_and_get_old(self, key, namespace):
        try:
            code = self._handle.removeAndGetOld(_java_value(key), _java_value(namespace))
        except _Java.JException as exc:
            raise _translate(exc) from None
        return self._twin(code)

    def transform(self, key, namespace, value, fn: Callable[[Any, Any], Any]) -> None:
        """Flink's transform with a Java StateTransformationFunction that calls ``fn(old, value)``."""
        self._maybe_prune()
        self._pending = lambda old: fn(old, value)
        try:
            self._handle.transform(_java_value(key), _java_value(namespace))
        except _Java.JException as exc:
            raise _translate(exc) from None
        finally:
            self._pending = None

    def _run_pending(self, state_code: int) -> int:
        """PythonSide.transform / filterOrTransform: the pending function on a state."""
        return self._state_id(self._pending(self._twin(state_code)))

    def __len__(self) -> int:
        return int(self._handle.size())

    def is_empty(self) -> bool:
        return len(self) == 0

    # -------------------------------------------------------- iteration

    def _row(self, row) -> tuple:
        key, namespace, code = row
        return key, namespace, self._twin(code)

    def __iter__(self) -> Iterator[tuple]:
        """Flink's fail-fast StateEntryIterator, one entry per call."""
        return _LiveIterator(self)

    def keys(self, namespace) -> Iterator:
        """Flink's ``getKeys(namespace)``, lazily."""
        return _KeyIterator(self, namespace)

    def size_of_namespace(self, namespace) -> int:
        try:
            return int(self._handle.sizeOfNamespace(_java_value(namespace)))
        except _Java.JException as exc:
            raise _translate(exc) from None

    def incremental_visitor(self, recommended_max_records: int) -> "_Visitor":
        """Flink's StateIncrementalVisitorImpl (TTL cleanup)."""
        return _Visitor(self, recommended_max_records)

    # -------------------------------------------------------- snapshots

    def snapshot(self) -> "FlinkSnapshot":
        """Flink's ``stateSnapshot()``; release it when done."""
        self._maybe_prune()
        return FlinkSnapshot(self, self._handle.snapshot())

    # -------------------------------------------------------- white box

    def _entry_records(self, reader: _Reader) -> None:
        """Update the mirrors from entry records (see MapHandle.entryRecords)."""
        mirrors = self._mirrors
        raw, key = reader.raw, reader.key
        records = []
        for _ in range(raw()):
            code = raw()
            if code < 0:
                mirror = mirrors[-code] = EntryMirror(key(), key())
            else:
                mirror = mirrors[code]
            records.append((mirror, raw(), raw(), raw(), raw(), raw()))
        twin = self._twin
        for mirror, next_id, state_code, entry_version, state_version, h in records:
            mirror.next = mirrors[next_id] if next_id else None
            mirror.state = twin(state_code) if state_code else None
            mirror.entry_version = entry_version
            mirror.state_version = state_version
            mirror.hash = h

    def _heads(self, reader: _Reader) -> list:
        mirrors = self._mirrors
        return [mirrors[i] if i else None for i in (reader.raw() for _ in range(reader.raw()))]

    def introspect(self) -> FlinkView:
        """The white-box view (reflection): every mirror reachable from the tables
        or an unreleased snapshot is brought up to date."""
        reader = _Reader(self._handle.introspect())
        raw = reader.raw
        _, _, psize, rsize, rehash_index, threshold, mod_count, version, required = (raw() for _ in range(9))
        rehashing = raw() == 1
        versions = {raw() for _ in range(raw())}
        self._entry_records(reader)
        primary = self._heads(reader)
        rehash = self._heads(reader)
        return FlinkView(primary, rehash, rehashing, psize, rsize, rehash_index, threshold, mod_count, version,
                         required, versions)

    def __repr__(self) -> str:
        return f"FlinkStateMap(size={len(self)})"


class _LiveIterator:
    __slots__ = ("map", "iterator", "done", "__weakref__")

    def __init__(self, m: FlinkStateMap) -> None:
        self.map = m
        self.iterator = m._handle.iterator()  # reads the first entry ahead, as Flink does
        self.done = False
        m._cursors.add(self)

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        if self.done:
            raise StopIteration
        m = self.map
        try:
            encoded = m._handle.next(self.iterator)
        except _Java.CME:
            expected, actual = _ints(m._handle.modCounts(self.iterator))
            raise ConcurrentModificationError(expected, actual) from None
        except _Java.JException as exc:
            raise _translate(exc) from None
        if encoded is None:
            self.done = True
            m._cursors.discard(self)
            raise StopIteration
        return m._row(_json(encoded))


class _KeyIterator:
    __slots__ = ("map", "iterator", "done", "__weakref__")

    def __init__(self, m: FlinkStateMap, namespace) -> None:
        self.map = m
        self.iterator = m._handle.keys(_java_value(namespace))
        self.done = False
        m._cursors.add(self)

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        try:
            encoded = self.map._handle.nextKey(self.iterator)
        except _Java.JException as exc:
            raise _translate(exc) from None
        if encoded is None:
            self.done = True
            self.map._cursors.discard(self)
            raise StopIteration
        return _json(encoded)[0]


class _Visitor:
    """``has_next()``, ``next_entries()`` (one chain of ``(key, namespace, state)``),
    ``remove(entry)``, ``update(entry, new_state)``."""

    __slots__ = ("map", "visitor", "__weakref__")

    def __init__(self, m: FlinkStateMap, recommended_max_records: int) -> None:
        self.map = m
        self.visitor = m._handle.visitor(recommended_max_records)
        m._cursors.add(self)

    def has_next(self) -> bool:
        more = bool(self.visitor.hasNext())
        if not more:
            self.map._cursors.discard(self)
        return more

    def next_entries(self) -> list:
        try:
            rows = _json(self.map._handle.nextEntries(self.visitor))
        except _Java.JException as exc:
            raise _translate(exc) from None
        return [self.map._row(r) for r in rows]

    def remove(self, entry: tuple) -> None:
        try:
            self.map._handle.visitorRemove(self.visitor, _java_value(entry[0]), _java_value(entry[1]))
        except _Java.JException as exc:
            raise _translate(exc) from None

    def update(self, entry: tuple, new_state) -> None:
        state_id = self.map._state_id(new_state)
        try:
            self.map._handle.visitorUpdate(self.visitor, _java_value(entry[0]), _java_value(entry[1]), state_id)
        except _Java.JException as exc:
            raise _translate(exc) from None


class FlinkSnapshot:
    """Flink's ``CopyOnWriteStateMapSnapshot`` (SPEC §15 snapshot API plus the
    white-box ``entry_objects()`` and ``snapshot_data``)."""

    __slots__ = ("owner", "_snapshot", "version", "entry_count", "__weakref__")

    def __init__(self, owner: FlinkStateMap, java_snapshot) -> None:
        self.owner = owner
        self._snapshot = java_snapshot
        self.version, self.entry_count = _ints(owner._handle.snapshotInfo(java_snapshot))
        owner._snapshots.add(self)

    def __len__(self) -> int:
        return self.entry_count

    @property
    def released(self) -> bool:
        return bool(self._snapshot.isReleased())

    def release(self) -> None:
        """Flink's ``release()``: idempotent."""
        try:
            self.owner._handle.release(self._snapshot)
        except _Java.JException as exc:
            error = _translate(exc)
            if isinstance(error, ValueError) and "different state map" in str(error):
                raise ForeignSnapshotError(self.version) from None
            raise error from None

    def is_owner(self, m) -> bool:
        return m is self.owner

    def __iter__(self) -> Iterator[tuple]:
        m = self.owner
        return iter([m._row(r) for r in _json(m._handle.read(self._snapshot))])

    def iterate(self, transformer: Callable[[Any], Any] | None = None) -> SnapshotView:
        """Flink's snapshot iterator; with a transformer, its TransformedSnapshotIterator
        (which rewrites the snapshot's array: the snapshot's last use)."""
        if transformer is None:
            return SnapshotView(self.entry_count, list(self))
        m = self.owner
        m._pending = transformer
        try:
            size, rows = _json(m._handle.readTransformed(self._snapshot))
        except _Java.JException as exc:
            raise _translate(exc) from None
        finally:
            m._pending = None
        return SnapshotView(size, [m._row(r) for r in rows])

    def write_state(self, out, key_serializer, namespace_serializer, state_serializer,
                    transformer: Callable[[Any], Any] | None = None) -> None:
        """Flink's ``writeState`` with Flink's serializers of the same ids as the
        given ``reference.serializers`` (states: ``list<int>`` only)."""
        state_id = getattr(state_serializer, "serializer_id", None)
        if state_id != "list<int>":
            raise ValueError(f"Flink bridge: states are written with ListSerializer(IntSerializer) "
                             f"('list<int>'), got {state_id!r}")
        if transformer is not None:
            raise ValueError("Flink bridge: write_state with a transformer is not supported")
        try:
            data = self.owner._handle.writeState(self._snapshot, key_serializer.serializer_id,
                                                 namespace_serializer.serializer_id)
        except _Java.JException as exc:
            raise _translate(exc) from None
        out.write(bytes(data))

    def _heads(self) -> list:
        m = self.owner
        reader = _Reader(m._handle.snapshotEntries(self._snapshot))
        m._entry_records(reader)
        return m._heads(reader)

    @property
    def snapshot_data(self) -> list:
        """The snapshot's array of bucket heads, as entry mirrors."""
        return self._heads()

    def entry_objects(self) -> Iterator[EntryMirror]:
        """Entry mirrors of the (untransformed) snapshot in Flink's order (white-box)."""
        out = []
        for head in self._heads():
            e = head
            while e is not None:
                out.append(e)
                e = e.next
        return iter(out)

    def __repr__(self) -> str:
        return f"FlinkSnapshot(version={self.version}, entries={self.entry_count}, released={self.released})"


# -------------------------------------------------------------- serializers


def _to_java(serializer, value):
    """``value`` as the Java object Flink's serializer of the same id takes."""
    import jpype

    from reference import serializers as ref

    if value is None:
        return None
    if isinstance(serializer, ref.LongSerializer):  # before IntSerializer, its base class
        return _Java.Long.valueOf(value)
    if isinstance(serializer, ref.IntSerializer):
        return _Java.Integer.valueOf(value)
    if isinstance(serializer, ref.StringSerializer):
        return _java_string(value)
    if isinstance(serializer, ref.BytesSerializer):
        return jpype.JArray(jpype.JByte)(bytes(value))
    if isinstance(serializer, ref.ListSerializer):
        out = jpype.JClass("java.util.ArrayList")()
        for x in value:
            out.add(_to_java(serializer.element_serializer, x))
        return out
    if isinstance(serializer, ref.MapSerializer):
        out = jpype.JClass("java.util.LinkedHashMap")()  # keeps the dict's order, as the reference writes it
        for k, v in value.items():
            out.put(_to_java(serializer.key_serializer, k), _to_java(serializer.value_serializer, v))
        return out
    raise TypeError(f"no Flink serializer for {type(serializer).__name__}")


def _from_java(value):
    import jpype

    if value is None:
        return None
    if isinstance(value, (_Java.Integer, _Java.Long)):
        return int(value)
    if isinstance(value, jpype.JClass("java.lang.String")):
        return _python_string(value)
    if isinstance(value, jpype.JArray(jpype.JByte)):
        return bytes(value)
    if isinstance(value, jpype.JClass("java.util.List")):
        return [_from_java(x) for x in value]
    if isinstance(value, jpype.JClass("java.util.Map")):
        return {_from_java(e.getKey()): _from_java(e.getValue()) for e in value.entrySet()}
    raise TypeError(f"no Python value for {value.getClass().getName()}")


def flink_serialize(serializer, value) -> bytes:
    """The bytes Flink 2.3.0's serializer with the id of ``serializer`` (a
    ``reference.serializers`` object) writes for ``value``."""
    jvm()
    try:
        return bytes(_Java.Serializers.serialize(serializer.serializer_id, _to_java(serializer, value)))
    except _Java.JException as exc:
        raise _translate(exc) from None


def flink_deserialize(serializer, data: bytes):
    """What Flink 2.3.0's serializer with the id of ``serializer`` reads from ``data``
    (all of it), as Python values."""
    jvm()
    import jpype

    try:
        return _from_java(_Java.Serializers.deserialize(serializer.serializer_id, jpype.JArray(jpype.JByte)(data)))
    except _Java.JException as exc:
        raise _translate(exc) from None


# -------------------------------------------------------------------- batch


def _encode_program(steps: list[Step]) -> tuple[list[int], list]:
    """Steps as Batch.java's op codes; keys and namespaces as indexes into a table."""
    table: list = []
    index: dict = {}

    def ref(value) -> int:
        cache_key = (type(value), value)
        i = index.get(cache_key)
        if i is None:
            i = index[cache_key] = len(table)
            table.append(_java_value(value))
        return i

    out: list[int] = []
    for step in steps:
        op, args = step.op, step.args
        code = _OP_CODE.get(op)
        if code is None:
            raise ValueError(f"run_batch: unknown operation {op!r}")
        out.append(code)
        if op in ("put", "put_and_get_old"):
            state = list(args[2])
            _int_array(state)
            out += [ref(args[0]), ref(args[1]), len(state), *state]
        elif op in ("get", "contains_key", "remove", "remove_and_get_old"):
            out += [ref(args[0]), ref(args[1])]
        elif op in ("get_mutate", "transform"):
            out += [ref(args[0]), ref(args[1]), args[2]]
        elif op == "iterate_modify":
            out += [args[0], ref(args[1]), ref(args[2]), 0 if args[3] == "put" else 1]
        elif op in ("keys", "size_of_namespace"):
            out.append(ref(args[0]))
        elif op == "read_snapshot_transformed":
            if args[1] not in _TRANSFORMER_CODE or args[1] not in SNAPSHOT_TRANSFORMERS:
                raise ValueError(f"run_batch: unknown snapshot transformer {args[1]!r}")
            out += [args[0], _TRANSFORMER_CODE[args[1]]]
        elif op != "iterate":
            out.append(args[0])
    return out, table


def run_batch(steps: list[Step], detail: str = "final") -> list:
    """Run a whole program on a fresh Flink map inside Java, in one call.

    Returns ``[per-step observations, final digest or None]`` exactly as
    ``properties.parity.observe`` computes them for any white-box map (so the
    reference's observations equal Flink's iff they behave the same).
    ``detail``: ``results``, ``summary``, ``final`` or ``every_step``
    (see ``observe``).
    """
    if detail not in DETAILS:
        raise ValueError(f"run_batch: detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    jvm()
    program, table = _encode_program(steps)
    return _json(_Java.Batch.run(_Java.int_array(program), _Java.object_array(table), DETAILS[detail]))


# ----------------------------------------------------------------- resolver


class FlinkImplementation(Implementation):
    """The ``flink`` implementation: ``new()`` builds a map of capacity 128 unless
    told otherwise (then FlinkCapacityError)."""

    def new(self, capacity: int = FLINK_CAPACITY, state_copier=copy.deepcopy):
        return self.factory(capacity=capacity, state_copier=state_copier)


def resolve_flink(rest: str) -> FlinkImplementation:
    """``resolve("flink")``: checks that jpype1 and the Flink jar are installed,
    without starting the JVM (a campaign driver resolves before forking)."""
    if rest:
        raise UnknownImplementationError(f"flink:{rest}", "the Flink bridge takes no options: use 'flink'")
    reason = available()
    if reason is not None:
        raise UnknownImplementationError("flink", reason)
    return FlinkImplementation("flink", FlinkStateMap, True,
                               "Apache Flink 2.3.0 CopyOnWriteStateMap through JPype (capacity 128 only)",
                               default_capacity=FLINK_CAPACITY)


register_resolver("flink", resolve_flink)
