"""Flink's own CopyOnWriteStateTable behind the table machine's API (``--machine table --impl flink[@VERSION]``).

The table lives in Java (``cowcheck.bridge.TableHandle``): Integer keys and
namespaces, List<Integer> states, key groups 0..127 of 128, the state first
registered with a serializer whose copy returns the same object. A state
handed to Python is a copy of the Java list; appending to it appends to the
Java list the table handed out (``getAndAppend``), so an in-place mutation
reaches exactly what it would reach in Java.
"""

from __future__ import annotations

from cowcheck.flink.convert import translate
from cowcheck.flink.jvm import Java, jvm

__all__ = ["FlinkStateTable", "FlinkTableSnapshot"]


class _JavaBackedState(list):
    """A state as Python sees it; ``append`` mutates the Java list in place."""

    def __init__(self, table: "FlinkStateTable", key: int, namespace: int, values) -> None:
        super().__init__(values)
        self._where = (table, key, namespace)

    def append(self, value) -> None:
        table, key, namespace = self._where
        try:
            table._handle.getAndAppend(key, namespace, value)
        except Java.JException as exc:
            raise translate(exc) from None
        super().append(value)


class FlinkStateTable:
    def __init__(self) -> None:
        jvm()
        import jpype

        self._handle = jpype.JClass("cowcheck.bridge.TableHandle")()
        self._next = 0

    def put(self, key, namespace, state) -> None:
        self._handle.put(key, namespace, Java.int_array(list(state)))

    def get(self, key, namespace):
        got = self._handle.get(key, namespace)
        return None if got is None else _JavaBackedState(self, key, namespace, [int(v) for v in got])

    def set_meta_info(self) -> None:
        self._handle.setMetaInfo()

    def snapshot(self) -> "FlinkTableSnapshot":
        sid = self._next
        self._next += 1
        self._handle.snapshot(sid)
        return FlinkTableSnapshot(self, sid)

    def __len__(self) -> int:
        return int(self._handle.size())


class FlinkTableSnapshot:
    def __init__(self, table: FlinkStateTable, sid: int) -> None:
        self._table, self._sid = table, sid
        self.released = False

    def __iter__(self):
        flat = [int(v) for v in self._table._handle.readSnapshot(self._sid)]
        out, i = [], 0
        while i < len(flat):
            key, namespace, length = flat[i], flat[i + 1], flat[i + 2]
            out.append((key, namespace, flat[i + 3: i + 3 + length]))
            i += 3 + length
        return iter(out)

    def write_key_group(self, out, group, key_serializer, namespace_serializer, state_serializer) -> None:
        """Flink's ``writeStateInKeyGroup`` with the serializers the state is registered
        with (Flink's Int, Int and List<Int> serializers: the ones the harness names)."""
        ids = [getattr(s, "serializer_id", None) for s in (key_serializer, namespace_serializer, state_serializer)]
        if ids != ["int", "int", "list<int>"]:
            raise ValueError(f"Flink bridge: the table writes with its registered serializers (int, int, "
                             f"list<int>), not {ids}")
        try:
            out.write(bytes(self._table._handle.writeKeyGroup(self._sid, group)))
        except Java.JException as exc:
            raise translate(exc) from None

    def release(self) -> None:
        self._table._handle.release(self._sid)
        self.released = True
