"""State requests and the executors that run them in batches against a backend.

``StateRequest``: one asynchronous state access (Flink ``StateRequest``): the
state it targets, its type, its payload, the future to complete and the record
context that issued it. ``execute_request`` runs one against a backend.

Backend protocol: ``backend.store(name)`` returns the store of one registered
state, and a store offers ``get(key, namespace)``, ``put(key, namespace,
value)`` and ``remove(key, namespace)``: exactly what ``CopyOnWriteStateMap``
(and a key-grouped ``CopyOnWriteStateTable``) offer, so either plugs in.
``HeapStateBackend`` keeps one store per state name, as Flink's heap backend
keeps one state table per registered state; non-windowed states use
``VOID_NAMESPACE``.

Executors (Flink ``StateExecutor``): ``SyncStateExecutor`` runs a batch at
once on the calling (task) thread, completing each future in batch order;
``ThreadedStateExecutor`` runs batches in order on one worker thread and hands
the completions back to the task thread as a mail. Both run requests in the
order of the batch, and batches in the order they were submitted.

>>> backend = HeapStateBackend()
>>> backend.store("count").put("k", VOID_NAMESPACE, 3)
>>> sorted(backend.items())
[('count', 'k', 0, 3)]
"""

from __future__ import annotations

import enum
import queue
import threading
from typing import Any, Callable, Iterator, Protocol

from cowcheck.reference.cow_state_map import CopyOnWriteStateMap

__all__ = [
    "StateRequestType",
    "StateRequest",
    "StateStore",
    "HeapStateBackend",
    "VOID_NAMESPACE",
    "execute_request",
    "SyncStateExecutor",
    "ThreadedStateExecutor",
]

# Flink's VoidNamespace for states that are not windowed. An int keeps the
# map's int hashing fast path.
VOID_NAMESPACE = 0


class StateRequestType(enum.Enum):
    """The request types the port executes (a subset of Flink's)."""

    SYNC_POINT = "SYNC_POINT"  # no state access: completes as soon as its record holds the key
    VALUE_GET = "VALUE_GET"
    VALUE_UPDATE = "VALUE_UPDATE"  # payload None clears, as in Flink
    CLEAR = "CLEAR"


class StateRequest:
    """One request. ``sync``: completed on activation instead of being buffered
    (only SYNC_POINT here)."""

    __slots__ = ("state", "request_type", "sync", "payload", "future", "context")

    def __init__(self, state, request_type: StateRequestType, payload, future, context) -> None:
        self.state = state
        self.request_type = request_type
        self.sync = request_type is StateRequestType.SYNC_POINT
        self.payload = payload
        self.future = future
        self.context = context

    def __repr__(self) -> str:
        name = getattr(self.state, "name", None)
        return (f"StateRequest({self.request_type.value}, state={name!r}, key={self.context.key!r}, "
                f"payload={self.payload!r})")


class StateStore(Protocol):
    """What an executor needs from the store of one state."""

    def get(self, key, namespace) -> Any: ...

    def put(self, key, namespace, state) -> None: ...

    def remove(self, key, namespace) -> None: ...


class HeapStateBackend:
    """One ``StateStore`` per state name, made by ``store_factory()`` on first
    use (default: a ``CopyOnWriteStateMap`` of Flink's default capacity)."""

    def __init__(self, store_factory: Callable[[], StateStore] = CopyOnWriteStateMap) -> None:
        self.store_factory = store_factory
        self.stores: dict[str, StateStore] = {}

    def store(self, name: str) -> StateStore:
        found = self.stores.get(name)
        if found is None:
            found = self.stores[name] = self.store_factory()
        return found

    def items(self) -> Iterator[tuple]:
        """``(state name, key, namespace, value)`` for every entry of every store."""
        for name, store in self.stores.items():
            for key, namespace, value in store:
                yield name, key, namespace, value


def execute_request(backend, request: StateRequest) -> Any:
    """Run one state access; the value to complete its future with."""
    state = request.state
    store = backend.store(state.name)
    kind = request.request_type
    if kind is StateRequestType.VALUE_GET:
        return store.get(request.context.key, state.namespace)
    if kind is StateRequestType.VALUE_UPDATE and request.payload is not None:
        store.put(request.context.key, state.namespace, request.payload)
        return None
    if kind is StateRequestType.VALUE_UPDATE or kind is StateRequestType.CLEAR:
        store.remove(request.context.key, state.namespace)
        return None
    raise ValueError(f"execute_request: an executor cannot run a {kind.value} request ({request!r})")


class SyncStateExecutor:
    """Runs each batch at once on the calling thread (deterministic)."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def execute_batch(self, requests: list[StateRequest]) -> None:
        backend = self.backend
        for request in requests:
            request.future.complete(execute_request(backend, request))

    def has_pending(self) -> bool:
        """True while submitted work has not been handed back yet."""
        return False

    def fully_loaded(self) -> bool:
        """Flink's back-off signal for forced triggers while draining; never here."""
        return False

    def close(self) -> None:
        pass


class ThreadedStateExecutor:
    """Runs batches in submission order on one worker thread; each batch's
    completions come back to the task thread as one mail on ``mailbox``.

    ``pending`` (batches submitted and not yet handed back) is only touched on
    the task thread: incremented on submit, decremented by the completion mail.
    A backend error travels back the same way and is raised on the task thread.
    """

    def __init__(self, backend, mailbox) -> None:
        self.backend = backend
        self.mailbox = mailbox
        self.pending = 0
        self._batches: queue.SimpleQueue = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name="cowcheck-state-executor", daemon=True)
        self._worker.start()

    def execute_batch(self, requests: list[StateRequest]) -> None:
        self.pending += 1
        self._batches.put(requests)

    def _run(self) -> None:
        while True:
            batch = self._batches.get()
            if batch is None:
                return
            try:
                results = [execute_request(self.backend, request) for request in batch]
            except Exception as exc:  # handed to the task thread, which fails loudly
                self.mailbox.post(_raiser(exc))
                continue
            self.mailbox.post(lambda batch=batch, results=results: self._complete(batch, results))

    def _complete(self, batch, results) -> None:
        self.pending -= 1
        for request, result in zip(batch, results):
            request.future.complete(result)

    def has_pending(self) -> bool:
        return self.pending > 0

    def fully_loaded(self) -> bool:
        return False

    def close(self) -> None:
        """Stop the worker after the batches already submitted (idempotent)."""
        if self._worker.is_alive():
            self._batches.put(None)
            self._worker.join()


def _raiser(exc: Exception) -> Callable[[], None]:
    def mail() -> None:
        raise exc
    return mail
