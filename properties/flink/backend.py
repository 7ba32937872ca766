"""Flink's own HeapKeyedStateBackend behind the reference's state-level API (``--machine backend --impl flink``).

:class:`FlinkStateBackend` speaks :mod:`cowcheck.reference.keyed`'s API
(``create_keyed_state_backend``, ``clock``) and drives
``cowcheck.bridge.BackendHandle`` (``java/``): Flink's backend built by its
``HeapKeyedStateBackendBuilder`` for the release of this process, states
registered through Flink's descriptors (with ``StateTtlConfig``: never
return expired, no background cleanup, cleanup in full snapshots),
``TtlTimeProvider`` a clock the harness moves. A checkpoint is Flink's
snapshot strategy writing into a ``MemCheckpointStreamFactory`` or an
``FsCheckpointStreamFactory`` (every state in a file); its asynchronous part
runs on the calling thread or on a Java thread of its own, the streams
yielding at random as they write when the harness asks
(``YieldingStreamFactory.yield_seed``). Handles are Flink's
``KeyedStateHandle`` objects, restored into fresh backends through the
builder (intersected with the new key-group range: rescaling).

``corruption``: a seeded Java-side corruption (:data:`~cowcheck.flink.corruptions.BACKEND_CORRUPTIONS`).
"""

from __future__ import annotations

from cowcheck.flink.convert import java_string, python_string
from cowcheck.flink.jvm import Java, jvm
from cowcheck.reference.serializers import IntSerializer
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["FlinkStateBackend", "FlinkKeyedBackend", "FlinkSnapshotFuture", "FlinkCheckpointHandle", "warm_up",
           "has_native_savepoints", "LEFT_OUT_OF_COMPARISONS"]

_WARM = False


def warm_up() -> None:
    """Start the JVM (compiling the helper on first use) and load Flink's keyed backend classes by
    building and disposing one backend: seconds, once per process, before the first timed step."""
    global _WARM
    if not _WARM:
        FlinkStateBackend().create_keyed_state_backend(IntSerializer(), 1, KeyGroupRange(0, 0)).dispose()
        _WARM = True

_KEY_TYPES = {"int": "int", "long": "long", "string": "string"}  # key serializer id -> BackendHandle's key type

# Steps the drivers that compare releases (parity, the matrix across releases) leave out of their walks:
# a map value null makes the next canonical savepoint fail on every release
# (docs/findings/canonical-savepoint-null-map-value.md), which would end every program there.
LEFT_OUT_OF_COMPARISONS = frozenset({"map_put_null"})


class FlinkClock:
    """The backends' ``TtlTimeProvider`` (``BackendHandle.Clock``); only the task thread moves it."""

    def __init__(self) -> None:
        import jpype

        self.java = jpype.JClass("cowcheck.bridge.BackendHandle$Clock")()

    def advance(self, millis: int) -> None:
        self.java.advance(millis)

    def current_timestamp(self) -> int:
        return int(self.java.currentTimestamp())


class FlinkCheckpointHandle:
    """A completed checkpoint or savepoint: Flink's ``KeyedStateHandle`` (a ``KeyGroupsStateHandle``,
    a ``KeyGroupsSavepointStateHandle`` for a canonical savepoint); ``storage`` (``inline``: a
    ``ByteStreamStateHandle``, or ``file``) and ``size`` (its stream's bytes), as the reference's handles."""

    def __init__(self, java) -> None:
        self.java = java

    @property
    def storage(self) -> str:
        return str(Java.jpype.JClass("cowcheck.bridge.BackendHandle").storage(self.java))

    @property
    def size(self) -> int:
        return int(Java.jpype.JClass("cowcheck.bridge.BackendHandle").size(self.java))

    def __repr__(self) -> str:
        return f"FlinkCheckpointHandle({self.java.toString()})"


class FlinkStateBackend:
    """Flink's heap keyed backends of this process's release, all on one clock (see the module docstring)."""

    def __init__(self, corruption: str = "") -> None:
        jvm()
        self.corruption = corruption
        self.clock = FlinkClock()

    def create_keyed_state_backend(self, key_serializer, max_parallelism: int, key_group_range,
                                   state_handles=(), class_version: int = 1) -> "FlinkKeyedBackend":
        """``class_version``: the version of the user classes the job runs with (the builder's user
        code class loader, ``cowcheck.bridge.Types``): a restore resolves them there."""
        import jpype

        key_type = _KEY_TYPES.get(getattr(key_serializer, "serializer_id", None))
        if key_type is None:
            raise ValueError(f"Flink bridge: keys are ints, longs or strings, not {key_serializer!r}")
        handles = jpype.JArray(jpype.JClass("org.apache.flink.runtime.state.KeyedStateHandle"))(
            [h.java for h in state_handles])
        handle = Java.jpype.JClass("cowcheck.bridge.BackendHandle")(
            key_type, max_parallelism, key_group_range.start, key_group_range.end, self.clock.java, handles,
            self.corruption, class_version)
        return FlinkKeyedBackend(handle, key_type, class_version)


class FlinkKeyedBackend:
    """One Flink backend: the key context, states, key iteration, snapshots."""

    def __init__(self, handle, key_type: str, class_version: int = 1) -> None:
        self._handle = handle
        self._class_version = class_version
        self._key = {"int": Java.Integer, "long": Java.Long, "string": java_string}[key_type]
        self._from_java = python_string if key_type == "string" else int

    def set_current_key(self, key) -> None:
        self._handle.setCurrentKey(self._key(key))

    def get_or_create_keyed_state(self, namespace_serializer, descriptor):
        if getattr(namespace_serializer, "serializer_id", None) != "int":
            raise ValueError("Flink bridge: namespaces are ints (IntSerializer)")
        ttl = descriptor.ttl_config
        values = _value_type(descriptor)
        self._handle.register(descriptor.name, descriptor.kind, ttl.ttl if ttl is not None else 0,
                              bool(ttl is not None and ttl.update_on_read), values)
        return _STATES[descriptor.kind](self._handle, descriptor.name, _Values(values, self._class_version))

    def get_keys(self, name: str, namespace):
        return [self._from_java(k) for k in self._handle.keys(name, namespace)]

    def snapshot(self, checkpoint_id: int, stream_factory=None, compressed: bool = False) -> "FlinkSnapshotFuture":
        return FlinkSnapshotFuture(self._handle.snapshot(checkpoint_id, *_streams(stream_factory), compressed))

    def savepoint(self, checkpoint_id: int, stream_factory=None, canonical: bool = True,
                  compressed: bool = False) -> "FlinkSnapshotFuture":
        """A canonical savepoint as Flink's operators take it, or a native one (1.15 on); key groups
        snappy-compressed if ``compressed`` (Flink compresses both forms under snapshot compression)."""
        return FlinkSnapshotFuture(self._handle.savepoint(checkpoint_id, *_streams(stream_factory), canonical,
                                                          compressed))

    def dispose(self) -> None:
        self._handle.dispose()


def _streams(stream_factory) -> tuple:
    """(directory or None for memory, yield seed or -1, inline threshold) of the harness's streams."""
    directory = getattr(stream_factory, "directory", None)
    seed = getattr(stream_factory, "yield_seed", None)
    return directory, -1 if seed is None else seed, getattr(stream_factory, "threshold", 0) if directory else 0


def has_native_savepoints() -> bool:
    """Whether this process's release takes native savepoints (1.15 on)."""
    jvm()
    return bool(Java.jpype.JClass("cowcheck.bridge.BackendHandle").hasNativeSavepoints())


class FlinkSnapshotFuture:
    """A checkpoint's asynchronous part (``BackendHandle.Pending``): ``run`` here, or ``start`` it
    on a Java thread and ``get`` its handle once ``done``."""

    def __init__(self, pending) -> None:
        self._pending = pending

    def run(self) -> FlinkCheckpointHandle:
        return FlinkCheckpointHandle(self._pending.run())

    def start(self) -> None:
        self._pending.start()

    @property
    def done(self) -> bool:
        return bool(self._pending.isDone())

    def get(self, timeout=None) -> FlinkCheckpointHandle:
        return FlinkCheckpointHandle(self._pending.result(-1 if timeout is None else int(timeout * 1000)))


def _int_or_none(value):
    return None if value is None else int(value)


def _value_type(descriptor) -> str:
    """The Flink value type of a reference descriptor's values: int, pojo or kryo (cowcheck.bridge.Types)."""
    from cowcheck.reference.kryo import KryoSerializer
    from cowcheck.reference.pojo import PojoSerializer

    serializer = getattr(descriptor, "user_value_serializer", None) or getattr(descriptor, "element_serializer", None) \
        or descriptor.serializer
    if isinstance(serializer, PojoSerializer):
        return "pojo"
    if isinstance(serializer, KryoSerializer):
        return "kryo"
    if getattr(serializer, "serializer_id", None) != "int":
        raise ValueError(f"Flink bridge: state values are ints, the POJO or the Kryo type, not {serializer!r}")
    return "int"


class _Values:
    """Values of one type across the bridge: ints boxed as Integer; a POJO's or Kryo type's objects
    (reference Records) as objects of the job's class version, field by field (``Types.object``/``fields``)."""

    __slots__ = ("type", "version")

    def __init__(self, value_type: str, version: int) -> None:
        self.type, self.version = value_type, version

    def to_java(self, value):
        if value is None:
            return None
        if self.type == "int":
            return Java.Integer(value)
        import jpype

        fields = []
        for v in value.fields.values():
            if isinstance(v, (bytes, bytearray)):
                v = jpype.JArray(jpype.JByte)(bytes(v))
            elif isinstance(v, list):
                v = jpype.JArray(jpype.JLong)(v)
            elif isinstance(v, str):
                v = java_string(v)
            elif isinstance(v, int):
                v = Java.Integer(v)
            fields.append(v)
        types = Java.jpype.JClass("cowcheck.bridge.Types")
        return types.object(value.class_name, self.version, jpype.JArray(jpype.JObject)(fields))

    def from_java(self, value):
        if value is None:
            return None
        if self.type == "int":
            return int(value)
        from cowcheck.reference.pojo import Record

        class_name, names, values = Java.jpype.JClass("cowcheck.bridge.Types").fields(value)
        return Record(python_string(class_name), {python_string(n): _python(v) for n, v in zip(names, values)})


def _python(value):
    """A field's value from Java: None, an int, a string, a list of longs, bytes."""
    if value is None:
        return None
    name = type(value).__name__
    if isinstance(value, (int, float)) or name in ("java.lang.Integer", "java.lang.Long"):
        return int(value)
    if name == "java.lang.String":
        return python_string(value)
    if name == "byte[]":
        return bytes(value)
    return [int(v) for v in value]


class _State:
    __slots__ = ("_handle", "_name", "_namespace", "_values")

    def __init__(self, handle, name: str, values: _Values) -> None:
        self._handle, self._name, self._namespace, self._values = handle, name, 0, values

    def set_current_namespace(self, namespace) -> None:
        self._namespace = namespace

    def clear(self) -> None:
        self._handle.clear(self._name, self._namespace)


class _ValueState(_State):
    __slots__ = ()

    def value(self):
        return self._values.from_java(self._handle.valueGet(self._name, self._namespace))

    def update(self, value) -> None:
        self._handle.valueUpdate(self._name, self._namespace, self._values.to_java(value))


class _ListState(_State):
    __slots__ = ()

    def get(self):
        got = self._handle.listGet(self._name, self._namespace)
        return None if got is None else [self._values.from_java(v) for v in got]

    def add(self, value) -> None:
        self._handle.listAdd(self._name, self._namespace, self._values.to_java(value))

    def update(self, values) -> None:
        import jpype

        self._handle.listUpdate(self._name, self._namespace,
                                jpype.JArray(jpype.JObject)([self._values.to_java(v) for v in values]))


class _MapState(_State):
    __slots__ = ()

    def get(self, user_key):
        return self._values.from_java(self._handle.mapGet(self._name, self._namespace, user_key))

    def put(self, user_key, value) -> None:
        self._handle.mapPut(self._name, self._namespace, user_key, self._values.to_java(value))

    def remove(self, user_key) -> None:
        self._handle.mapRemove(self._name, self._namespace, user_key)

    def contains(self, user_key) -> bool:
        return bool(self._handle.mapContains(self._name, self._namespace, user_key))

    def entries(self):
        flat = self._handle.mapEntries(self._name, self._namespace)
        if flat is None:
            return None
        return [(int(flat[i]), self._values.from_java(flat[i + 1])) for i in range(0, len(flat), 2)]


class _ReducingState(_State):
    __slots__ = ()

    def get(self):
        return _int_or_none(self._handle.reduceGet(self._name, self._namespace))

    def add(self, value) -> None:
        self._handle.reduceAdd(self._name, self._namespace, value)


_STATES = {"value": _ValueState, "list": _ListState, "map": _MapState, "reducing": _ReducingState}
