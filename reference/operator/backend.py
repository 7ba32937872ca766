"""The operator state backend (Flink ``DefaultOperatorStateBackend``, built by its builder; as of 2.3.0).

Contract: an operator's ``initializeState`` registers its states through
descriptors: ``get_list_state`` (SPLIT_DISTRIBUTE: split round-robin on
rescaling), ``get_union_list_state`` (UNION: every instance gets all of it)
and ``get_broadcast_state`` (BROADCAST: a map every instance gets a copy of).
The first call for a name creates the state, or takes over the one restored
under that name, whose serializers the descriptor's must be compatible with
(the same serializer here; another one: :class:`StateMigrationError`, Flink's
``StateMigrationException``); later calls return the same object. A name
registered in one mode cannot be taken in another (IllegalStateError).

``snapshot(checkpoint_id, stream_factory, compressed=None)`` is a checkpoint's
synchronous part: every state deep-copied (``deep_copy``: what the
asynchronous part writes, whatever the task thread does next); the returned
:class:`OperatorSnapshotFuture` is its asynchronous part (``run`` here, or
``start`` on a thread of its own, then ``get``), which writes the proxy, each
list state's elements (their offsets) and each broadcast state, through a
snappy framed stream when compressed (``compressed``: None takes the
backend's setting, Flink's ``ExecutionConfig#isUseSnapshotCompression``), and
returns an :class:`~cowcheck.reference.operator.format.OperatorStreamStateHandle`,
or None when no state is registered (Flink: an empty snapshot).

:class:`OperatorStateBackends` builds backends, fresh or restored from handles
(Flink's ``OperatorStateRestoreOperation``: each handle's proxy read, the states
it names created, each state's offsets read), and repartitions handles for a new
parallelism (:mod:`~cowcheck.reference.operator.repartition`).

>>> from cowcheck.reference.serializers import IntSerializer
>>> from cowcheck.reference.keyed import ListStateDescriptor
>>> backends = OperatorStateBackends()
>>> b = backends.create_operator_state_backend()
>>> ids = b.get_list_state(ListStateDescriptor("ids", IntSerializer())); ids.add_all([1, 2, 3])
>>> future = b.snapshot(1, compressed=True); ids.add(4)   # the synchronous part copied [1, 2, 3]
>>> handle = future.run()
>>> [backends.create_operator_state_backend(part).get_list_state(ListStateDescriptor("ids", IntSerializer())).get()
...  for part in backends.repartition([[handle]], 1, 2)]
[[1, 2], [3]]
"""

from __future__ import annotations

import itertools
import threading
from typing import Iterable, Optional

import attrs

from cowcheck.reference.checkpoint.flink_format.compression import CompressibleInput, CompressibleOutput, RawInput
from cowcheck.reference.checkpoint.streams import CheckpointStreamFactory
from cowcheck.reference.errors import CheckpointFormatError, IllegalStateError
from cowcheck.reference.keyed.backend import StateMigrationError
from cowcheck.reference.operator.format import (OperatorProxy, OperatorStreamStateHandle,
                                                StateOffsets, StreamData)
from cowcheck.reference.operator.javamap import expected_size_capacity, java_map_order, java_string_hash
from cowcheck.reference.operator.repartition import RoundRobinRepartitioner
from cowcheck.reference.operator.states import (BROADCAST, SPLIT_DISTRIBUTE, UNION, HeapBroadcastState,
                                                OperatorStateMetaInfo, PartitionableListState,
                                                PartitionableListStateBefore119)
from cowcheck.reference.serializers import SerializationError

__all__ = ["DefaultOperatorStateBackend", "OperatorSnapshotFuture", "OperatorStateBackends", "StateMigrationError"]

_STREAM_NAMES = itertools.count()


def _serializer_id(serializer) -> str:
    return getattr(serializer, "serializer_id", type(serializer).__name__)


class OperatorSnapshotFuture:
    """The asynchronous part of one operator checkpoint: ``run()`` here, or ``start()`` on a thread of its own,
    then ``get(timeout)`` (the handle or None, or the exception the write raised); ``done``."""

    __slots__ = ("backend", "checkpoint_id", "copies", "stream_factory", "compressed", "_thread", "_result",
                 "_error", "_started")

    def __init__(self, backend, checkpoint_id: int, copies: tuple, stream_factory, compressed: bool) -> None:
        self.backend, self.checkpoint_id, self.copies = backend, checkpoint_id, copies
        self.stream_factory, self.compressed = stream_factory, compressed
        self._thread: Optional[threading.Thread] = None
        self._result = None
        self._error: Optional[BaseException] = None
        self._started = False

    def _begin(self) -> None:
        if self._started:
            raise IllegalStateError(f"the asynchronous part of checkpoint {self.checkpoint_id} was already started")
        self._started = True

    def _write(self) -> None:
        try:
            self._result = self.backend.write_snapshot(self.checkpoint_id, self.copies, self.stream_factory,
                                                       self.compressed)
        except BaseException as exc:  # kept for get(): the task thread decides what it means
            self._error = exc

    def run(self):
        self._begin()
        self._write()
        return self.get()

    def start(self) -> None:
        self._begin()
        self._thread = threading.Thread(target=self._write, name=f"async-operator-checkpoint-{self.checkpoint_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._started and (self._thread is None or not self._thread.is_alive())

    def get(self, timeout: Optional[float] = None):
        if not self._started:
            raise IllegalStateError(f"the asynchronous part of checkpoint {self.checkpoint_id} never started")
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the asynchronous part of checkpoint {self.checkpoint_id} is still running")
        if self._error is not None:
            raise self._error
        return self._result


class DefaultOperatorStateBackend:
    """See the module docstring. Seams for seeded bugs: ``output_class`` (the compressed stream the
    asynchronous part writes through), ``input_class`` (what restore reads through), ``list_state_class``
    and ``broadcast_state_class`` (the states, their deep copies), ``future_class`` (the asynchronous part)."""

    output_class = CompressibleOutput
    input_class = CompressibleInput
    list_state_class = PartitionableListState
    broadcast_state_class = HeapBroadcastState
    future_class = OperatorSnapshotFuture

    def __init__(self, compression: bool = False, release: str = "2.3.0") -> None:
        self.compression = compression
        if _before(release, (1, 19, 0)) and self.list_state_class is PartitionableListState:
            self.list_state_class = PartitionableListStateBefore119
        self.list_states: dict[str, PartitionableListState] = {}  # registeredOperatorStates (a HashMap)
        self.broadcast_states: dict[str, HeapBroadcastState] = {}  # registeredBroadcastStates
        self._accessed: dict = {}  # name -> the state handed out (accessedStatesByName and its broadcast twin)

    # ------------------------------------------------------------ registration

    def get_list_state(self, descriptor) -> PartitionableListState:
        return self._list_state(descriptor, SPLIT_DISTRIBUTE)

    def get_union_list_state(self, descriptor) -> PartitionableListState:
        return self._list_state(descriptor, UNION)

    def _list_state(self, descriptor, mode: str) -> PartitionableListState:
        if descriptor is None:
            raise TypeError("the state descriptor is null")
        name = descriptor.name
        previous = self._accessed.get(name)
        if isinstance(previous, PartitionableListState):
            _check_mode(name, previous.meta.mode, mode)
            return previous
        serializer = descriptor.element_serializer
        state = self.list_states.get(name)
        if state is None:
            state = self.list_states[name] = self.list_state_class(OperatorStateMetaInfo(name, mode, serializer))
        else:
            _check_mode(name, state.meta.mode, mode)
            if _serializer_id(state.meta.value_serializer) != _serializer_id(serializer):
                raise StateMigrationError(name, _serializer_id(state.meta.value_serializer), _serializer_id(serializer))
            state.meta = attrs.evolve(state.meta, value_serializer=serializer)
        self._accessed[name] = state
        return state

    def get_broadcast_state(self, descriptor) -> HeapBroadcastState:
        if descriptor is None:
            raise TypeError("the state descriptor is null")
        name = descriptor.name
        previous = self._accessed.get(name)
        if isinstance(previous, HeapBroadcastState):
            return previous
        keys, values = descriptor.user_key_serializer, descriptor.user_value_serializer
        state = self.broadcast_states.get(name)
        if state is None:
            state = self.broadcast_states[name] = self.broadcast_state_class(
                OperatorStateMetaInfo(name, BROADCAST, values, keys))
        else:
            for which, old, new in (("key", state.meta.key_serializer, keys), ("value", state.meta.value_serializer,
                                                                              values)):
                if _serializer_id(old) != _serializer_id(new):
                    raise StateMigrationError(name, f"{which} {_serializer_id(old)}", f"{which} {_serializer_id(new)}")
            state.meta = attrs.evolve(state.meta, key_serializer=keys, value_serializer=values)
        self._accessed[name] = state
        return state

    @property
    def registered_state_names(self) -> list[str]:
        return list(self.list_states)

    @property
    def registered_broadcast_state_names(self) -> list[str]:
        return list(self.broadcast_states)

    # ------------------------------------------------------------ checkpoints

    def snapshot(self, checkpoint_id: int, stream_factory: Optional[CheckpointStreamFactory] = None, *,
                 compressed: Optional[bool] = None, savepoint: bool = False) -> OperatorSnapshotFuture:
        """The synchronous part: every state deep-copied, in the order of Flink's copies (HashMaps sized for
        them); run or start the result. A savepoint (``savepoint``) is this same snapshot: Flink's
        StreamOperatorStateHandler takes it through the backend's ``snapshot`` with savepoint options, and
        DefaultOperatorStateBackendSnapshotStrategy never reads its CheckpointOptions (javap, 1.13.6 and 2.3.0):
        an operator savepoint's bytes are a checkpoint's, canonical or native alike."""
        lists = self._copies(self.list_states)
        broadcasts = self._copies(self.broadcast_states)
        return self.future_class(self, checkpoint_id, (lists, broadcasts), stream_factory or
                                      CheckpointStreamFactory(), self.compression if compressed is None else compressed)

    @staticmethod
    def _copies(states: dict) -> dict:
        order = java_map_order(java_map_order(list(states), java_string_hash), java_string_hash,
                               expected_size_capacity(len(states)))
        return {name: states[name].deep_copy() for name in order}

    def write_snapshot(self, checkpoint_id: int, copies: tuple, stream_factory, compressed: bool):
        """The asynchronous part (``OperatorSnapshotFuture`` calls it): the handle, None if nothing is registered."""
        lists, broadcasts = copies
        if not lists and not broadcasts:
            return None
        stream = stream_factory.create_stream(checkpoint_id, suffix="")
        try:
            proxy = OperatorProxy([s.meta for s in lists.values()], [s.meta for s in broadcasts.values()], compressed)
            stream.write(proxy.encode())
            staged = _Staged(stream)
            out = self.output_class(staged, compressed)
            written: dict = {}
            for name, state in lists.items():
                written[name] = StateOffsets(state.write(out), state.meta.mode)
                staged.flush()
            for name, state in broadcasts.items():
                written[name] = StateOffsets([state.write(out)], BROADCAST)
                staged.flush()
            out.close()
            staged.flush()
            path, inline, size = stream.close_and_get_result()
        except BaseException:
            stream.discard()
            raise
        data = StreamData(path or f"operator-{checkpoint_id}-{next(_STREAM_NAMES)}", size, inline, path)
        return OperatorStreamStateHandle(written, data, expected_size_capacity(len(written)))

    def dispose(self) -> None:
        self.list_states.clear()
        self.broadcast_states.clear()
        self._accessed.clear()

    # ------------------------------------------------------------ restore

    def restore(self, handles: Iterable) -> None:
        """``OperatorStateRestoreOperation.restore``: each handle in order; its proxy's states created unless
        already there, then each state it names read at its offsets."""
        for handle in handles:
            if handle is None:
                continue
            data = handle.stream.read_bytes()
            raw = RawInput(data, 0, handle.stream.path or f"<inline operator state {handle.stream.name}>")
            proxy = OperatorProxy.decode(raw)
            for meta in proxy.operator_states:  # (a copy: proxies read before are kept, OperatorProxy.decode)
                self.list_states.setdefault(meta.name, self.list_state_class(attrs.evolve(meta)))
            for meta in proxy.broadcast_states:
                self.broadcast_states.setdefault(meta.name, self.broadcast_state_class(attrs.evolve(meta)))
            inp = self.input_class(raw, proxy.compressed)
            for meta in (*proxy.operator_states, *proxy.broadcast_states):
                offsets = handle.states.get(meta.name)
                if offsets is None:
                    continue
                if meta.name in self.list_states:
                    self._read_list(self.list_states[meta.name], inp, offsets, raw)
                else:
                    self._read_broadcast(self.broadcast_states[meta.name], inp, offsets, raw)

    @staticmethod
    def _read_list(state: PartitionableListState, inp, offsets: StateOffsets, raw: RawInput) -> None:
        serializer = state.meta.value_serializer
        for offset in offsets.offsets:
            if offset != inp.tell():
                inp.seek(offset)
            element = _read(serializer, inp, raw, offset, state.meta.name)
            if element is None:  # Flink restores with add(), which rejects it (a null string stored before 1.19)
                raise TypeError("You cannot add null to a ListState.")
            state.elements.append(element)

    @staticmethod
    def _read_broadcast(state: HeapBroadcastState, inp, offsets: StateOffsets, raw: RawInput) -> None:
        if not offsets.offsets:
            return
        inp.seek(offsets.offsets[0])
        size = int.from_bytes(_exact(inp, 4, raw, offsets.offsets[0], state.meta.name), "big", signed=True)
        if size < 0:
            raise CheckpointFormatError(raw.name, offsets.offsets[0], f"broadcast state {state.meta.name!r}: "
                                                                      f"negative size {size}")
        for _ in range(size):
            key = _read(state.meta.key_serializer, inp, raw, offsets.offsets[0], state.meta.name)
            state.entries_map[key] = _read(state.meta.value_serializer, inp, raw, offsets.offsets[0], state.meta.name)


class _Staged:
    """The checkpoint stream as the writers see it, its bytes handed on a state at a time (``flush``): the
    stream gets one write per state, not one per element (a stream that yields as it writes yields as often)."""

    __slots__ = ("stream", "buffer", "base")

    def __init__(self, stream) -> None:
        self.stream, self.buffer, self.base = stream, bytearray(), stream.tell()

    def write(self, data: bytes) -> None:
        self.buffer += data

    def tell(self) -> int:
        return self.base + len(self.buffer)

    def flush(self) -> None:
        if self.buffer:
            self.stream.write(bytes(self.buffer))
            self.base += len(self.buffer)
            self.buffer.clear()


class _Reader:
    """A serializer's view of the input: ``read(n)`` must give ``n`` bytes."""

    __slots__ = ("inp",)

    def __init__(self, inp) -> None:
        self.inp = inp

    def read(self, n: int) -> bytes:
        return self.inp.read(n)


def _exact(inp, n: int, raw: RawInput, offset: int, name: str) -> bytes:
    got = inp.read(n)
    if len(got) != n:
        raise CheckpointFormatError(raw.name, offset, f"state {name!r}: its data ends early")
    return got


def _read(serializer, inp, raw: RawInput, offset: int, name: str):
    try:
        return serializer.deserialize(_Reader(inp))
    except (SerializationError, ValueError, UnicodeDecodeError) as exc:
        raise CheckpointFormatError(raw.name, offset, f"state {name!r}: {exc}") from None


def _before(release: str, version: tuple) -> bool:
    return tuple(int(p) for p in release.split(".")[:3]) < version


def _check_mode(name: str, registered: str, requested: str) -> None:
    if registered != requested:
        raise IllegalStateError(f"Incorrect operator state mode for {name!r}: registered {registered}, "
                                f"requested {requested}")


class OperatorStateBackends:
    """Builds operator state backends (Flink's ``DefaultOperatorStateBackendBuilder``): ``compression`` is the
    job's snapshot compression; ``release``: whose null handling the list states follow (2.3.0's by default;
    before 1.19.0, :class:`~cowcheck.reference.operator.states.PartitionableListStateBefore119`'s);
    ``backend_class`` and ``repartitioner`` are seams for seeded bugs."""

    def __init__(self, *, compression: bool = False, release: str = "2.3.0",
                 backend_class: type = DefaultOperatorStateBackend,
                 repartitioner: Optional[RoundRobinRepartitioner] = None) -> None:
        self.compression = compression
        self.release = release
        self.backend_class = backend_class
        self.repartitioner = repartitioner or RoundRobinRepartitioner()

    def create_operator_state_backend(self, state_handles: Iterable = ()) -> DefaultOperatorStateBackend:
        """A backend holding what ``state_handles`` hold (none: an empty one)."""
        backend = self.backend_class(self.compression, self.release)
        backend.restore(list(state_handles))
        return backend

    def repartition(self, previous: list, old_parallelism: int, new_parallelism: int) -> list:
        """Per new subtask, the handles it restores (``RoundRobinOperatorStateRepartitioner``)."""
        return self.repartitioner.repartition(previous, old_parallelism, new_parallelism)


