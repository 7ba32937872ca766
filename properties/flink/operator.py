"""Flink's own DefaultOperatorStateBackend behind the reference's API (``--machine operator --impl flink``).

:class:`FlinkOperatorBackends` speaks :class:`cowcheck.reference.operator.OperatorStateBackends`'s API
(``create_operator_state_backend``, ``repartition``, ``release``) and drives
``cowcheck.bridge.OperatorHandle`` (``java/``): Flink's backend built by its
``DefaultOperatorStateBackendBuilder`` for the release of this process, states
registered through Flink's descriptors, checkpoints through its snapshot
strategy (compressed ones, 1.18.0 on, through a second runner with the snappy
decorator; savepoints with Flink's canonical savepoint options) into memory or file streams that yield at random when the harness
asks, repartitioning by ``RoundRobinOperatorStateRepartitioner``. Values cross as
``Integer``, ``Long``, ``String`` and ``ArrayList<Integer>``; a list element or
broadcast value handed out is a :class:`LiveList`, whose ``append`` changes the
Java object in place (as user code changes what Flink hands it).
"""

from __future__ import annotations

from cowcheck.flink.convert import java_string, python_string
from cowcheck.flink.jvm import Java, jvm
from cowcheck.flink.releases import selected_build

__all__ = ["FlinkOperatorBackends", "FlinkOperatorHandle", "LiveList", "warm_up"]

_WARM = False


def warm_up() -> None:
    """Start the JVM and load Flink's operator backend classes by building and disposing one backend."""
    global _WARM
    if not _WARM:
        FlinkOperatorBackends().create_operator_state_backend([]).dispose()
        _WARM = True


def _java_value(kind: str, value):
    """A Python value of ``kind`` (``int``, ``long``, ``string``, ``list<int>``) as the Java object Flink holds."""
    if value is None:
        return None
    if kind == "int":
        return Java.Integer(value)
    if kind == "long":
        return Java.Long(value)
    if kind == "string":
        return java_string(value)
    element = kind[len("list<"):-1]
    out = Java.jpype.JClass("java.util.ArrayList")()
    for v in value:
        out.add(_java_value(element, v))
    return out


def _python_value(value):
    if value is None:
        return None
    if isinstance(value, Java.jpype.JClass("java.lang.String")):
        return python_string(value)
    if isinstance(value, Java.jpype.JClass("java.util.List")):
        return [_python_value(v) for v in value]
    return int(value)


class LiveList(list):
    """A Java list's elements as a Python list; ``append`` appends to the Java list too (``on_append``)."""

    def __init__(self, values, on_append) -> None:
        super().__init__(values)
        self._on_append = on_append

    def append(self, value) -> None:
        self._on_append(value)
        super().append(value)


class FlinkOperatorHandle:
    """A completed operator checkpoint of one instance: Flink's ``OperatorStateHandle``."""

    def __init__(self, java) -> None:
        self.java = java

    def __repr__(self) -> str:
        return f"FlinkOperatorHandle({self.java.toString()})"


class FlinkOperatorBackends:
    """Flink's operator state backends of this process's release (see the module docstring)."""

    def __init__(self) -> None:
        jvm()
        self.release = selected_build().behaves_as

    def create_operator_state_backend(self, state_handles=()) -> "FlinkOperatorBackend":
        import jpype

        handles = jpype.JArray(jpype.JClass("org.apache.flink.runtime.state.OperatorStateHandle"))(
            [h.java for h in state_handles])
        return FlinkOperatorBackend(Java.jpype.JClass("cowcheck.bridge.OperatorHandle")(handles))

    def repartition(self, previous: list, old_parallelism: int, new_parallelism: int) -> list:
        import jpype

        handle_class = jpype.JClass("org.apache.flink.runtime.state.OperatorStateHandle")
        rows = jpype.JArray(handle_class, 2)([jpype.JArray(handle_class)([h.java for h in row]) for row in previous])
        out = Java.jpype.JClass("cowcheck.bridge.OperatorHandle").repartition(rows, old_parallelism, new_parallelism)
        return [[FlinkOperatorHandle(h) for h in row] for row in out]


class FlinkOperatorBackend:
    """One Flink operator backend: registration, snapshots (``compressed`` from 1.18.0)."""

    def __init__(self, handle) -> None:
        self._handle = handle

    def _register(self, descriptor, mode: str):
        self._handle.register(descriptor.name, mode, descriptor.element_serializer.serializer_id, None)
        return _ListState(self._handle, descriptor.name, descriptor.element_serializer.serializer_id)

    def get_list_state(self, descriptor):
        return self._register(descriptor, "SPLIT_DISTRIBUTE")

    def get_union_list_state(self, descriptor):
        return self._register(descriptor, "UNION")

    def get_broadcast_state(self, descriptor):
        keys, values = descriptor.user_key_serializer.serializer_id, descriptor.user_value_serializer.serializer_id
        self._handle.register(descriptor.name, "BROADCAST", values, keys)
        return _BroadcastState(self._handle, descriptor.name, keys, values)

    def snapshot(self, checkpoint_id: int, stream_factory=None, compressed: bool = False,
                 savepoint: bool = False) -> "FlinkOperatorFuture":
        directory = getattr(stream_factory, "directory", None)
        seed = getattr(stream_factory, "yield_seed", None)
        return FlinkOperatorFuture(self._handle.snapshot(checkpoint_id, directory, -1 if seed is None else seed,
                                                         bool(compressed), bool(savepoint)))

    def dispose(self) -> None:
        self._handle.dispose()


class FlinkOperatorFuture:
    """A checkpoint's asynchronous part (``OperatorHandle.Pending``)."""

    def __init__(self, pending) -> None:
        self._pending = pending

    @staticmethod
    def _wrap(java):
        return None if java is None else FlinkOperatorHandle(java)

    def run(self):
        return self._wrap(self._pending.run())

    def start(self) -> None:
        self._pending.start()

    @property
    def done(self) -> bool:
        return bool(self._pending.isDone())

    def get(self, timeout=None):
        return self._wrap(self._pending.result(-1 if timeout is None else int(timeout * 1000)))


class _ListState:
    __slots__ = ("_handle", "_name", "_kind")

    def __init__(self, handle, name: str, kind: str) -> None:
        self._handle, self._name, self._kind = handle, name, kind

    def _list(self, values):
        import jpype

        if values is None:
            return None
        out = jpype.JClass("java.util.ArrayList")()
        for v in values:
            out.add(_java_value(self._kind, v))
        return out

    def get(self) -> list:
        out = []
        for i, element in enumerate(self._handle.listGet(self._name)):
            value = _python_value(element)
            if isinstance(value, list):
                value = LiveList(value, lambda v, i=i: self._handle.listElementAppend(self._name, i, v))
            out.append(value)
        return out

    def add(self, value) -> None:
        self._handle.listAdd(self._name, _java_value(self._kind, value))

    def add_all(self, values) -> None:
        self._handle.listAddAll(self._name, self._list(values))

    def update(self, values) -> None:
        self._handle.listUpdate(self._name, self._list(values))

    def clear(self) -> None:
        self._handle.clear(self._name)


class _BroadcastState:
    __slots__ = ("_handle", "_name", "_keys", "_values")

    def __init__(self, handle, name: str, keys: str, values: str) -> None:
        self._handle, self._name, self._keys, self._values = handle, name, keys, values

    def _key(self, key):
        return _java_value(self._keys, key)

    def get(self, key):
        value = _python_value(self._handle.get(self._name, self._key(key)))
        if isinstance(value, list):
            value = LiveList(value, lambda v: self._handle.valueAppend(self._name, self._key(key), v))
        return value

    def put(self, key, value) -> None:
        self._handle.put(self._name, self._key(key), _java_value(self._values, value))

    def put_all(self, entries) -> None:
        import jpype

        if entries is None:
            self._handle.putAll(self._name, None)
            return
        out = jpype.JClass("java.util.HashMap")()
        for k, v in entries.items():
            out.put(self._key(k), _java_value(self._values, v))
        self._handle.putAll(self._name, out)

    def remove(self, key) -> None:
        self._handle.remove(self._name, self._key(key))

    def contains(self, key) -> bool:
        return bool(self._handle.contains(self._name, self._key(key)))

    def entries(self) -> list:
        flat = [_python_value(v) for v in self._handle.entries(self._name)]
        return list(zip(flat[::2], flat[1::2]))

    def clear(self) -> None:
        self._handle.clear(self._name)
