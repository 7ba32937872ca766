"""An implementation in a process of its own: proxies in the checker, a server beside the implementation.

The checker (harness, model, verdict) never imports a user's module: a
:class:`Worker` forks a child that imports it and serves requests over two
pipes; the checker holds proxies (:class:`RemoteObject`) that speak the
implementation's API. Whatever the module does at import (patching the
suite), whatever its code does when called (``sys.exit``, ``os._exit``, a
segfault, a hang), it does in its own process; the checker sees calls that
return, raise, or never come back.

Protocol. Messages are length-prefixed :mod:`marshal` data (plain values only;
nothing is pickled, nothing crossing is code). The checker sends batches
``(BATCH, deferred, final)``: ``deferred`` requests are calls whose answer is
not awaited (``put``, ``remove``, ``release``: they return None), ``final``
the one whose answer it waits for. The
child answers each final once, with the root object's ``len()`` read after it
(so the harness's ``len(m)`` after every step costs no request). A deferred
request that raises is answered at once (``LATE``) and the rest of the
program is skipped: the error reaches the harness at the step's next request
(:class:`~properties.core.boundary.LateError`), a CRASH of the same step.
A walk run ahead (:mod:`properties.core.ahead`) is one request whose
records (``STEP``) come before its answer; a Hypothesis example's walk takes
its steps in ``(MORE, steps)`` messages until ``(END,)``. The answer that
ends a walk is not waited for: it is read before the next request
(:meth:`Worker.collect`).

What crosses, and how identity is kept:

- plain values (None, bool, int, float, str, bytes; tuples; Flink's
  ``Tuple2``, ``TimeWindow``, ``VOID_NAMESPACE``) are copied;
- **lists** (states) cross with a handle: the same child list is always the
  same checker list (a *twin*), a list the checker hands in becomes the twin
  of the child's new list, so P6's identity rule is checked on twins as on
  the map's own objects. Content is refreshed whenever a list crosses; a
  list the checker changes in place after a call returned it (the harness
  appends to a state ``get`` returned) reaches the child before its next
  request;
- **keys the checker passes** keep their identity relation: a fresh key
  object arrives as a fresh object, the same object as last time for an
  equal key arrives as the same object (``hold_keys``);
- **any other object** (snapshots, iterators, views, visitors, values of
  odd types) stays in the child and crosses as a handle: the checker gets a
  proxy of a class named like the object's, with its methods and the
  special methods its type has (``__len__``, ``__iter__``, ``__eq__``,
  ``__repr__``...), all answered by the object itself; attributes are read
  when asked (two reads with no request between them are one read);
- **exceptions** come back as exceptions of the same name, message and
  nearest builtin class (a ``ConcurrentModificationError`` is still a
  RuntimeError), marked :class:`~properties.core.boundary.ImplementationError`;
  a BaseException there (``SystemExit``...) comes back as an Exception that
  says so;
- **functions** the checker passes: those both sides know by name
  (:class:`Isolation` ``functions``: ``copy.deepcopy``, snapshot transformers)
  run in the child; any other is called back: the child asks, the checker runs
  it on the twins and answers (``transform``'s function records what it was given);
- an output stream becomes a stream in the child whose bytes are written to
  the checker's after the call; a serializer of :mod:`reference.serializers`
  is rebuilt from its id.

Lifecycle: one child per implementation module, started when the spec is
resolved (a module that cannot be imported is bad usage), serving program
after program: each call of the factory (:class:`RemoteFactory`) builds a
fresh implementation there and forgets the previous program's objects. A
child that dies, hangs past the step time limit (the limit's SIGALRM
interrupts the checker's wait; the child is then killed) or is interrupted
is replaced when the next program starts. The child ignores SIGINT (a Ctrl-C
is the checker's to handle), dies with its parent (``PR_SET_PDEATHSIG``),
and prints to stderr (stdout is the checker's report).
"""

from __future__ import annotations

import atexit
import builtins
import copy
import gc
import importlib
import inspect
import io
import marshal
import operator
import os
import select
import signal
import sys
import time
import types
from collections import deque
from itertools import islice
from typing import Callable

import attrs

from properties.core.boundary import (WORKER_PROTOCOL, ImplementationError, LateError, WorkerFailure,
                                      no_user_here, raised_text)
from properties.core.errors import InternalError, callables_of, did_you_mean
from properties.core.processes import describe_wait_status
from properties.core.limits import StepTimeout, current_limit, implementation_call
from reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2, VoidNamespace
from reference.serializers import serializer_from_id

__all__ = ["Isolation", "RemoteFactory", "RemoteObject", "ImportFailed", "take", "expect_calls", "changed_in_place",
           "hidden_methods", "shutdown_workers", "remote_factory"]

# Messages.
_READY, _IMPORT_ERROR, _BATCH, _ANSWER, _CALLBACK, _REPLY, _STEP, _MORE, _END = range(9)
# Requests.
_NEW, _CALL, _OP, _GETATTR, _DRAIN, _CALLS, _SYNC, _NOP, _WALK, _FOLLOWED = range(10)
# Answers.
_OK, _ERR, _LATE, _SKIPPED, _PROTOCOL = range(5)
# Value tags: a tagged value is a tuple whose first element is one of these.
_T_TUPLE, _T_LIST, _T_LISTX, _T_OBJ, _T_TUPLE2, _T_WINDOW, _T_VOID, _T_SAME, _T_FN, _T_CALLBACK, _T_SINK, \
    _T_SERIALIZER, _T_CALLABLE, _T_ENTRIES = range(14)

_SCALARS = frozenset({int, str, float, bytes, bool, type(None)})
_MAX_DEPTH = 32  # containers nest no deeper across the boundary (deeper: a handle)
_MAX_MESSAGE = 64 << 20  # bytes: a larger message is a broken protocol (a 50,000-entry map sends 93 KB at most)
# Seconds a side polls for the other's message before it sleeps in select(): a round trip through
# the kernel's wake-up costs about 60 us on an idle 2-core machine, a poll that finds the message
# about 4 us, and answers to calls made one by one mostly come well within this. Polling for
# messages that come later only burns a core another process needs: see _Channel._read.
_SPIN = 0.0005
_CHUNK_SECONDS = 0.02  # seconds a request of announced calls should take (Session.prefetch)
_CHUNK_MOST = 4096
_FLUSH_AT = 256  # deferred requests sent ahead once this many wait
_TEXT = 10_000  # characters of an exception's message that cross


class ImportFailed(Exception):
    """The module could not be imported in its process, or has no such callable; ``str()`` says why."""


@attrs.frozen
class Isolation:
    """What a machine tells the protocol about its implementations' API.

    ``deferred``: methods (of any object there) that return None, so their answer
    need not be awaited (``put``, ``remove``, ``release``); ``hidden``: attributes the checker never reads
    across processes (white-box views: the implementation is checked black-box
    there); ``functions``: functions both sides know by name (they run in the
    child instead of being called back); ``followed``: ``{first: then}``, methods
    that the checker, whenever ``first()`` answers true, calls ``then()`` on the
    same object right after (a visitor's ``has_next`` and ``next_entries``): the
    child makes that call at once and its answer (or error) waits in the checker
    for it, so the pair costs one round trip."""

    deferred: frozenset = frozenset()
    hidden: frozenset = frozenset()
    functions: dict = attrs.Factory(dict)
    followed: dict = attrs.Factory(dict)

    def known(self) -> dict:
        return {"copy.deepcopy": copy.deepcopy, "copy.copy": copy.copy, **self.functions}


def _memoable(value) -> bool:
    """Whether the identity of an argument ``value`` must be carried (CPython shares the others)."""
    t = type(value)
    if t is int:
        return not -5 <= value <= 256
    if t is str:
        return len(value) > 1 or (len(value) == 1 and ord(value) > 255)
    return t is Tuple2 or t is TimeWindow


class _Broken(Exception):
    """The other side sent what the protocol does not allow."""


# ---------------------------------------------------------------- channel


class _Channel:
    """Length-prefixed marshal messages over two file descriptors."""

    __slots__ = ("rfd", "wfd", "buffer", "spin")

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd
        self.buffer = bytearray()
        self.spin = _SPIN  # seconds the next wait polls first (_read)
        os.set_blocking(rfd, False)  # read() polls for up to _SPIN, then waits in select()

    def send(self, message) -> None:
        data = marshal.dumps(message)
        self._write(len(data).to_bytes(4, "big") + data)

    def send_all(self, messages: list) -> None:
        """The messages, in order, written at once (the other side wakes once for them all)."""
        parts = []
        for message in messages:
            data = marshal.dumps(message)
            parts.append(len(data).to_bytes(4, "big"))
            parts.append(data)
        self._write(b"".join(parts))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def receive(self):
        buffer = self.buffer
        while True:
            if len(buffer) >= 4:
                size = int.from_bytes(buffer[:4], "big")
                if size > _MAX_MESSAGE:
                    raise _Broken(f"a message of {size} bytes")
                if len(buffer) >= 4 + size:
                    data = bytes(buffer[4:4 + size])
                    del buffer[:4 + size]
                    try:
                        return marshal.loads(data)
                    except (ValueError, EOFError, TypeError) as exc:
                        raise _Broken(f"a message that does not decode ({exc})") from None
                need = 4 + size - len(buffer)
            else:
                need = 4 - len(buffer)
            chunk = self._read(max(need, 1 << 16))
            if not chunk:
                raise EOFError
            buffer += chunk

    def waiting(self) -> bool:
        """Whether :meth:`receive` returns (or raises) now, without waiting for the other side."""
        buffer = self.buffer
        while len(buffer) < 4 or len(buffer) < 4 + int.from_bytes(buffer[:4], "big"):
            try:
                chunk = os.read(self.rfd, 1 << 16)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            buffer += chunk
        return True

    def _read(self, size: int) -> bytes:
        """Bytes that are there, or the next ones to come (b"" at the end); a signal handler that
        raises (the step time limit) interrupts the wait. On a machine with a core to spare
        it polls first for twice as long as the last wait took, if that was shorter than
        ``_SPIN`` (the other side answering call by call on a core of its own); a longer wait
        (the other side busy with work of its own) is spent asleep in select(), and so is the
        next one, until one is short again. On a loaded machine it never polls: the core it
        would hold is one the other side, or another process, is waiting for."""
        fd = self.rfd
        try:
            return os.read(fd, size)
        except BlockingIOError:
            pass
        started = time.perf_counter()
        if self.spin and _core_to_spare():
            give_up = started + self.spin
            while True:
                try:
                    data = os.read(fd, size)
                except BlockingIOError:
                    if time.perf_counter() < give_up:
                        continue
                    break
                self.spin = min(_SPIN, 2 * (time.perf_counter() - started))
                return data
        while True:
            select.select([fd], [], [])
            try:
                data = os.read(fd, size)
            except BlockingIOError:
                continue
            waited = time.perf_counter() - started
            self.spin = 2 * waited if waited < _SPIN / 2 else 0.0
            return data

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass


_SPARE = [0.0, False]  # (time.monotonic() when last asked, whether a core was to spare)


def _core_to_spare() -> bool:
    """Whether the machine has a core nobody waits for (the load average, read at most once a
    second, under the cores less one): else a side that polls takes the core the other side,
    or another process, needs."""
    now = time.monotonic()
    if now - _SPARE[0] > 1.0:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = float("inf")
        _SPARE[0], _SPARE[1] = now, load + 1 < (os.cpu_count() or 1)
    return _SPARE[1]


# ----------------------------------------------------------------- worker

_WORKERS: dict = {}


class Worker:
    """The process running one implementation module (see the module docstring)."""

    def __init__(self, module: str, attribute: str, isolation: Isolation) -> None:
        self.module, self.attribute, self.isolation = module, attribute, isolation
        self.pid: int | None = None
        self.channel: _Channel | None = None
        self.generation = 0  # moves at every start and every program: a session of an older one is stale
        self.types: dict = {}  # (the child's type id, root) -> proxy class (per child process)
        self.infos: dict = {}  # the child's type id -> what it said of the type
        self.started = 0  # processes started
        self.start_seconds = 0.0
        self.streaming = False  # it runs a walk ahead (properties.core.ahead): no request until it ends
        self.owed = 0  # answers of walks ended and not read yet: read before the next request (collect)
        self.owner = 0  # the process that started it (a forked process starts its own)
        self.chunks: dict = {}  # method name -> how many of its announced calls a request makes (Session._fetch)

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def start(self) -> None:
        """Fork the child and wait until it has imported the module (under the step time limit
        of the step running). ImportFailed if it cannot."""
        started = time.perf_counter()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child never returns into the caller's stack
            code = 0
            try:
                os.close(to_child_w)
                os.close(from_child_r)
                _child_main(parent, to_child_r, from_child_w, self.module, self.attribute, self.isolation)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(to_child_r)
        os.close(from_child_w)
        _widen(from_child_r)  # a walk run ahead streams its records without waiting for the checker
        _widen(to_child_w)
        self.pid = pid
        self.owner = parent
        self.channel = _Channel(from_child_r, to_child_w)
        self.generation += 1
        self.types, self.infos = {}, {}
        self.owed = 0
        self.started += 1
        try:
            message = self.channel.receive()
        except EOFError:
            status = self._reap()
            raise ImportFailed(f"importing module {self.module!r} ended its process "
                               f"({describe_wait_status(status)})") from None
        except StepTimeout:
            self.kill()
            limit = current_limit()
            raise ImportFailed(f"importing module {self.module!r} did not return within the step time limit"
                               f"{f' of {limit:g} s' if limit else ''}") from None
        except _Broken as exc:
            self.kill()
            raise ImportFailed(f"the process importing module {self.module!r} sent {exc}") from None
        except BaseException:
            self.kill()
            raise
        if not (type(message) is tuple and message and message[0] in (_READY, _IMPORT_ERROR)):
            self.kill()
            raise ImportFailed(f"the process importing module {self.module!r} answered {message!r:.80}")
        if message[0] == _IMPORT_ERROR:
            self._reap()
            raise ImportFailed(str(message[1]))
        self.start_seconds += time.perf_counter() - started

    def _reap(self) -> int:
        """Wait for a child whose pipe closed (killing it if it lingers): its wait status."""
        pid, self.pid = self.pid, None
        self.streaming = False
        self.owed = 0
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if pid is None:
            return 0
        for _ in range(100):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.01)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return os.waitpid(pid, 0)[1]

    def kill(self) -> None:
        """End the child now (it hangs, or the conversation is out of step)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def roundtrip(self, session: "Session", message):
        """Send ``message`` and wait for its answer, answering the child's callbacks
        meanwhile; ``(answer, late)`` where ``late`` is the error of a deferred request
        (or None). WorkerFailure if the child ends or breaks the protocol; on any other
        BaseException (the step time limit, Ctrl-C) the child is killed first."""
        if self.owed:
            self.collect()
        channel = self.channel
        if channel is None:
            raise WorkerFailure("its process had ended")
        try:
            channel.send(message)
            late = None
            while True:
                reply = channel.receive()
                if type(reply) is not tuple or not reply:
                    raise _Broken(f"a message {reply!r:.60}")
                kind = reply[0]
                if kind == _ANSWER:
                    if len(reply) != 5:
                        raise _Broken(f"an answer {reply!r:.60}")
                    if reply[1] == _LATE:
                        late = late or reply[2]
                        continue
                    return reply, late
                if kind == _CALLBACK:
                    session.callback(reply)
                    continue
                raise _Broken(f"a message of kind {kind!r:.20}")
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise WorkerFailure(describe_wait_status(self._reap())) from None
        except _Broken as exc:
            self.kill()
            raise WorkerFailure(f"it sent {exc}", WORKER_PROTOCOL) from None
        except BaseException:
            self.kill()
            raise

    def collect(self) -> None:
        """Read the answers owed (:attr:`owed`: the ends of walks run ahead, after their records
        not read), those already here first. A process that does not give them as the protocol
        says, or not in time, is ended (the next program starts another): what ends a walk is
        not the next program's doing."""
        try:
            while self.owed and self.channel.waiting():
                self._owed(self.channel.receive())
            if self.owed:
                implementation_call(self._collect_rest)
        except (EOFError, OSError, _Broken, StepTimeout):
            self.kill()
        except BaseException:
            self.kill()
            raise

    def _collect_rest(self) -> None:
        while self.owed:
            self._owed(self.channel.receive())

    def _owed(self, message) -> None:
        if type(message) is tuple and message and message[0] == _STEP:
            return  # the record of a step sent and not checked (its walk failed over there)
        if not (type(message) is tuple and len(message) == 5 and message[0] == _ANSWER):
            raise _Broken(f"a message {message!r:.60} where a walk ends")
        self.owed -= 1

    def send_ahead(self, message) -> None:
        """Send ``message``, which awaits no answer."""
        if self.channel is None:
            raise WorkerFailure("its process had ended")
        try:
            self.channel.send(message)
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerFailure(describe_wait_status(self._reap())) from None
        except BaseException:
            self.kill()
            raise


def _widen(fd: int) -> None:
    """A pipe's buffer as large as an unprivileged process may make it (Linux; 1 MiB by default)."""
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as f:
            size = int(f.read())
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size, 4 << 20))
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def worker_for(module: str, attribute: str, isolation: Isolation) -> Worker:
    """The running child for ``module:attribute`` (started, or restarted, if need be)."""
    worker = _WORKERS.get((module, attribute))
    if worker is not None and worker.owner not in (0, os.getpid()):  # inherited by fork: its child is the parent's
        worker = None
    if worker is None:
        worker = _WORKERS[(module, attribute)] = Worker(module, attribute, isolation)
    if not worker.alive:
        worker.start()
    return worker


def shutdown_workers() -> None:
    """End every child this process started (at exit; tests)."""
    for worker in _WORKERS.values():
        if worker.owner == os.getpid():
            worker.kill()


atexit.register(shutdown_workers)


# ------------------------------------------------------------------ proxies


class RemoteObject:
    """An object living in the implementation's process (see the module docstring).
    Subclasses are made per type of object there, named like it, with its methods."""

    __slots__ = ("_s", "_h", "__weakref__")
    _hidden: frozenset = frozenset()

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._s.getattr(self._h, name)

    def __repr__(self) -> str:
        return self._s.op(self._h, "repr")

    def __eq__(self, other):
        return self._s.op(self._h, "eq", other)

    def __ne__(self, other):
        return self._s.op(self._h, "ne", other)

    def __lt__(self, other):
        return self._s.op(self._h, "lt", other)

    def __le__(self, other):
        return self._s.op(self._h, "le", other)

    def __gt__(self, other):
        return self._s.op(self._h, "gt", other)

    def __ge__(self, other):
        return self._s.op(self._h, "ge", other)

    def __hash__(self):
        return self._s.op(self._h, "hash")

    def __str__(self) -> str:
        return self._s.op(self._h, "str")

    def __deepcopy__(self, memo):
        return self._s.op(self._h, "deepcopy")

    def __copy__(self):
        return self._s.op(self._h, "copy")


def _len(self):
    return self._s.op(self._h, "len")


def _root_len(self):
    return self._s.root_len(self._h)


def _iter(self):
    return self._s.iter(self._h)


def _self(self):
    return self


def _next(self):
    return self._s.op(self._h, "next")


def _bool(self):
    return self._s.op(self._h, "bool")


def _contains(self, item):
    return self._s.op(self._h, "contains", item)


def _getitem(self, key):
    return self._s.op(self._h, "getitem", key)


def _call(self, *args, **kwargs):
    return self._s.op(self._h, "call", *args, **kwargs)


_DUNDERS = {"__len__": _len, "__iter__": _iter, "__next__": _next, "__bool__": _bool, "__contains__": _contains,
            "__getitem__": _getitem, "__call__": _call}


def _method(name: str):
    def method(self, *args, **kwargs):
        return self._s.call(self._h, name, args, kwargs)
    method.__name__ = name
    return method


def _followed(name: str, then: str):
    def method(self, *args, **kwargs):
        return self._s.followed(self._h, name, then, args, kwargs)
    method.__name__ = name
    return method


def _deferred(name: str):
    def method(self, *args, **kwargs):
        return self._s.defer(self._h, name, args, kwargs)
    method.__name__ = name
    return method


class _Bound:
    """A callable attribute read from an object in the child (an instance attribute)."""

    __slots__ = ("_s", "_h", "_name")

    def __init__(self, session, handle, name) -> None:
        self._s, self._h, self._name = session, handle, name

    def __call__(self, *args, **kwargs):
        return self._s.call(self._h, self._name, args, kwargs)


def _proxy_class(info: tuple, root: bool, isolation: Isolation) -> type:
    _, name, methods, dunders, self_iter, hidden = info
    namespace = {"__slots__": (), "_hidden": frozenset(hidden)}
    deferred = isolation.deferred
    followed = isolation.followed
    for method in methods:
        if method in deferred:
            namespace[method] = _deferred(method)
        elif method in followed and followed[method] in methods:
            namespace[method] = _followed(method, followed[method])
        else:
            namespace[method] = _method(method)
    for dunder in dunders:
        namespace[dunder] = _DUNDERS[dunder]
    if root and "__len__" in dunders:
        namespace["__len__"] = _root_len
    if self_iter:
        namespace["__iter__"] = _self
    cls = type(name, (RemoteObject,), namespace)
    cls.__qualname__ = name
    cls.__module__ = "<its own process>"
    return cls


_ERRORS: dict = {}


def _error_class(name: str, base_name: str) -> type:
    key = (name, base_name)
    cls = _ERRORS.get(key)
    if cls is None:
        base = getattr(builtins, base_name, None)
        if not (isinstance(base, type) and issubclass(base, Exception)):
            base = Exception
        try:
            cls = type(name, (base, ImplementationError), {"__str__": ImplementationError.__str__})
        except TypeError:  # a base that does not mix
            cls = type(name, (Exception, ImplementationError), {"__str__": ImplementationError.__str__})
        cls.__module__ = "<its own process>"
        _ERRORS[key] = cls
    return cls


def _exception_info(exc: BaseException) -> tuple:
    """(name, nearest builtin Exception class, str(), not an Exception, token) of ``exc``."""
    cls = type(exc)
    base = "Exception"
    for klass in cls.__mro__:
        if getattr(builtins, klass.__name__, None) is klass and issubclass(klass, Exception):
            base = klass.__name__
            break
    try:
        text = str(exc)
    except Exception:
        text = f"<{cls.__name__} whose str() raised>"
    token = getattr(exc, "_cowcheck_token", None)
    name = cls.__name__ if type(cls.__name__) is str else "Exception"
    return (name[:200], base, text[:_TEXT], not isinstance(exc, Exception), token if type(token) is int else None)


# ------------------------------------------------------------------ session


class Session:
    """One program: the implementation the factory built in the child, and every object
    of the program on both sides (handles, twins, proxies, the keys' identities)."""

    def __init__(self, worker: Worker, isolation: Isolation) -> None:
        self.worker = worker
        self.isolation = isolation
        self.generation = worker.generation
        self.root = None  # handle of the implementation
        self.pending: list = []  # deferred requests not yet sent
        self.twins: dict = {}  # handle -> list
        self.twin_ids: dict = {}  # id(list) -> handle (the twins are held: ids stay theirs)
        self.next_handle = -1  # the checker's handles are negative, the child's positive
        self.proxies: dict = {}
        self.memo: dict = {}  # (type, value) -> the last key object passed with that value
        self.watch: list = []  # (list, copy) handed out by the last answer: changed in place -> synced
        self.length = None  # (ok, value or error): the root's len() after the last answer, while valid
        self.attrs: dict = {}  # (handle, name) -> an attribute read since the last request
        self.plain: dict = {}  # handle -> attributes of a new object read with the last answer (no code ran)
        self.prefetched: deque = deque()  # (handle, name, args, outcome) of calls made ahead
        self.announced: deque = deque()  # (handle, name, args) of calls announced, not made yet
        self.chunks = getattr(worker, "chunks", {})  # method name -> how many announced calls a request makes
        self.callbacks: dict = {}
        self.errors: dict = {}  # token -> an exception a callback raised here (re-raised as itself)
        self.sinks: list = []
        self.closed: BaseException | None = None  # why nothing more can be asked
        names = isolation.known()
        self.functions = {id(fn): name for name, fn in names.items()}

    # ------------------------------------------------------- requests

    def new(self, args: tuple, kwargs: dict):
        code = self.exchange((_NEW, [self.enc_arg(a) for a in args], {k: self.enc_arg(v) for k, v in kwargs.items()}),
                             decode=False)
        if type(code) is tuple and len(code) == 5 and code[0] == _T_OBJ and type(code[1]) is int:
            self.root = code[1]
            try:
                return self.proxy(code[1], self.proxy_class(code[2:4] if code[3] is not None else code[2:3],
                                                            root=True))
            except _Broken:
                pass
        return self.decoded(code)

    def _before_request(self) -> None:
        if self.closed is not None:
            raise self.closed
        if self.worker.streaming:
            raise InternalError("a request to an implementation that is running a walk ahead")
        if self.generation != self.worker.generation:
            if not self.worker.alive:
                raise WorkerFailure("its process was ended before this program finished")
            raise InternalError("an object of an earlier program was used after the next program had started")
        if self.attrs:
            self.attrs.clear()
        if self.plain:
            self.plain.clear()
        self.length = None
        if self.watch:
            changed = [self.enc(v) for v, seen in self.watch if v != seen]
            self.watch = []
            if changed:
                self.pending.append((_SYNC, changed))

    def defer(self, handle, name, args, kwargs):
        """A call whose answer is not awaited (it returns None)."""
        self._before_request()
        self.pending.append((_CALL, handle, name, [self.enc_arg(a) for a in args],
                             {k: self.enc_arg(v) for k, v in kwargs.items()} if kwargs else None))
        if len(self.pending) >= _FLUSH_AT:
            pending, self.pending = self.pending, []
            self.worker.send_ahead((_BATCH, pending, None))
        return None

    def exchange(self, final, decode: bool = True):
        self._before_request()
        pending, self.pending = self.pending, []
        sinks, self.sinks = self.sinks, []
        try:
            answer, late = self.worker.roundtrip(self, (_BATCH, pending, final))
        except WorkerFailure as exc:
            self.closed = exc
            raise
        except BaseException as exc:
            self.closed = WorkerFailure(f"its process was ended ({type(exc).__name__} in the checker)")
            raise
        except _Broken as exc:  # a callback's answer could not be read
            self.worker.kill()
            self.closed = WorkerFailure(f"it sent {exc}", WORKER_PROTOCOL)
            raise self.closed from None
        finally:
            self.callbacks.clear()
        _, status, payload, length, extras = answer
        if late is not None:
            self.closed = LateError(self.error(late))
            raise self.closed
        if status == _OK:
            self.length = length
            for sink, data in zip(sinks, extras if type(extras) is tuple else ()):
                if type(data) is bytes:
                    sink.write(data)
            if not decode:
                return payload
            value = self.decoded(payload)
            if type(value) is list:
                self.watch.append((value, value[:]))
            self.errors.clear()
            return value
        if status == _ERR:
            self.length = length
            error = self.error(payload)
            self.errors.clear()
            raise error
        if status == _PROTOCOL:
            self.worker.kill()
            self.closed = WorkerFailure(f"it reported {payload!r:.200}", WORKER_PROTOCOL)
            raise self.closed
        self.worker.kill()
        self.closed = WorkerFailure(f"it answered with status {status!r:.20}", WORKER_PROTOCOL)
        raise self.closed

    def call(self, handle, name, args, kwargs):
        if self.prefetched or self.announced:
            return self._prefetched(handle, name, args)
        return self.exchange((_CALL, handle, name, [self.enc_arg(a) for a in args],
                              {k: self.enc_arg(v) for k, v in kwargs.items()} if kwargs else None))

    def followed(self, handle, name, then, args, kwargs):
        """``name(*args)``, and if it answers true, ``then()`` made at once over there: its
        outcome answers the checker's next call (``Isolation.followed``)."""
        if self.prefetched or self.announced:
            return self._prefetched(handle, name, args)
        code = self.exchange((_FOLLOWED, handle, name, [self.enc_arg(a) for a in args],
                              {k: self.enc_arg(v) for k, v in kwargs.items()} if kwargs else None, then),
                             decode=False)
        if not (type(code) is tuple and len(code) == 2 and (code[1] is None or (
                type(code[1]) is tuple and len(code[1]) == 2))):
            return self.decoded((None,))  # a breach: WorkerFailure
        value = self.decoded(code[0])
        if code[1] is not None:
            self.prefetched.append((handle, then, (), code[1]))
        return value

    def op(self, handle, name, *args, **kwargs):
        if self.closed is not None and name in ("repr", "str"):
            return "<an object of a process that ended>"
        return self.exchange((_OP, handle, name, [self.enc_arg(a) for a in args],
                              {k: self.enc_arg(v) for k, v in kwargs.items()} if kwargs else None))

    def iter(self, handle):
        return self.op(handle, "iter")

    def decoded(self, code):
        """``dec``, a protocol breach ending the child (WorkerFailure)."""
        try:
            return self.dec(code)
        except _Broken as exc:
            self.worker.kill()
            self.closed = WorkerFailure(f"it sent {exc}", WORKER_PROTOCOL)
            raise self.closed from None

    def root_len(self, handle):
        if self.prefetched or self.announced:
            raise InternalError(f"len() of the implementation while "
                                f"{len(self.prefetched) + len(self.announced)} announced calls are unmade")
        if self.length is not None and not self.pending and handle == self.root:
            ok, value = self.length
            if ok:
                return value
            raise self.error(value)
        self.exchange((_NOP,))
        ok, value = self.length if self.length is not None else (False, None)
        if ok:
            return value
        raise self.error(value) if value is not None else InternalError("no len() came back")

    def getattr(self, handle, name):
        if name in self.isolation.hidden:
            raise AttributeError(name)
        plain = self.plain.get(handle)
        if plain is not None and name in plain:
            return plain[name]
        key = (handle, name)
        cached = self.attrs.get(key)
        if cached is None:
            try:
                value = self.exchange((_GETATTR, handle, name))
            except Exception as exc:
                self.attrs[key] = (False, exc)
                raise
            cached = self.attrs[key] = (True, value)
        ok, value = cached
        if not ok:
            raise value
        if value is _CALLABLE:
            return _Bound(self, handle, name)
        return value

    def drain(self, handle, n: int):
        """At most ``n`` items of the iterator ``handle``: (items, error or None)."""
        code = self.exchange((_DRAIN, handle, n), decode=False)
        if not (type(code) is tuple and len(code) == 2):
            return self.decoded((None,)), None  # a breach: WorkerFailure
        items = code[0]
        items = [self.decoded(item) for item in items] if type(items) is list else self.decoded(items)
        if type(items) is not list:
            return self.decoded((None,)), None
        return items, (self.error(code[1]) if code[1] is not None else None)

    def prefetch(self, handle, name, calls: list) -> None:
        """The harness's next calls are ``name(*args)`` for each ``args`` of ``calls``, in that
        order: they are made a chunk per request as the harness reaches them. A chunk is sized
        from the pace of that method's calls so that it takes about ``_CHUNK_SECONDS`` (one call
        first): a request never holds many slow calls, so the step time limit still times about
        one call (a fast ``put`` does not make a slow ``get``'s chunk large)."""
        self.announced.extend((handle, name, args) for args in calls)

    def _fetch(self) -> None:
        """Make the next chunk of announced calls (those on the same object and method)."""
        handle, name, _ = self.announced[0]
        chunk = []
        most = self.chunks.get(name, 1)
        while self.announced and len(chunk) < most:
            h, n, args = self.announced[0]
            if (h, n) != (handle, name):
                break
            chunk.append(self.announced.popleft()[2])
        started = time.perf_counter()
        codes = self.exchange((_CALLS, handle, name, [[self.enc_arg(a) for a in args] for args in chunk]),
                              decode=False)
        seconds = time.perf_counter() - started
        if type(codes) is not list or not all(type(o) is tuple and len(o) == 2 for o in codes) or \
                len(codes) > len(chunk) or not codes:
            self.decoded((None,))  # a breach: WorkerFailure
        for args, outcome in zip(chunk, codes):
            self.prefetched.append((handle, name, args, outcome))
        for args in reversed(chunk[len(codes):]):  # not made (one raised): made when reached
            self.announced.appendleft((handle, name, args))
        self.chunks[name] = max(1, min(_CHUNK_MOST, int(_CHUNK_SECONDS * len(codes) / max(seconds, 1e-6))))

    def _prefetched(self, handle, name, args):
        if not self.prefetched:
            self._fetch()
        h, n, expected, outcome = self.prefetched.popleft()
        if (h, n) != (handle, name) or len(expected) != len(args) or any(
                type(a) is not type(b) or a != b for a, b in zip(expected, args)):
            raise InternalError(f"the harness called {name}{args!r:.80} where it had announced {n}{expected!r:.80}")
        ok, code = outcome
        if not ok:
            raise self.error(code)
        value = self.decoded(code)
        if type(value) is list:
            self.watch.append((value, value[:]))
        return value

    # ------------------------------------------------------- callbacks

    def callback(self, message) -> None:
        """The child calls a function of the checker (a harness's ``transform`` function):
        run it here on the twins and answer, with the twins it changed."""
        if len(message) != 3 or message[1] not in self.callbacks:
            raise _Broken(f"a callback {message!r:.80}")
        fn = self.callbacks[message[1]]
        values = [self.dec(code) for code in message[2]]
        seen = [(v, v[:]) for v in values if type(v) is list]
        try:
            result = fn(*values)
        except Exception as exc:
            token = len(self.errors) + 1
            self.errors[token] = exc
            reply = (_REPLY, _ERR, _exception_info(exc)[:4] + (token,))
        else:
            reply = (_REPLY, _OK, self.enc(result))
        changed = [self.enc(v) for v, before in seen if v != before]
        self.worker.channel.send(reply + (changed,))

    # ------------------------------------------------------- values

    def error(self, info) -> BaseException:
        """The exception the child described."""
        if type(info) is not tuple or len(info) != 5:
            self.worker.kill()
            return WorkerFailure(f"it described an exception as {info!r:.80}", WORKER_PROTOCOL)
        name, base, text, base_exception, token = info
        if token is not None and token in self.errors:
            return self.errors.pop(token)
        cls = _error_class(str(name), str(base))
        try:
            exc = cls(str(text))
        except Exception:
            exc = cls.__new__(cls)
        exc.args = (str(text),)
        exc.remote_text = str(text)
        exc.base_exception = bool(base_exception)
        return exc

    def proxy(self, handle, cls):
        proxy = self.proxies.get(handle)
        if proxy is None:
            proxy = object.__new__(cls)
            proxy._s, proxy._h = self, handle
            self.proxies[handle] = proxy
        return proxy

    def _column(self, column, depth: int) -> list:
        if type(column) is not tuple or len(column) not in (2, 3) or type(column[1]) is not list:
            raise _Broken("a column that is not one")
        kind, values = column[0], column[1]
        if kind == 0:
            return values
        if kind == 1:
            return [self.dec(x, depth + 1) for x in values]
        contents = column[2]
        if kind != 2 or type(contents) is not list or len(contents) != len(values):
            raise _Broken("a column of lists that is not one")
        twins, twin_ids = self.twins, self.twin_ids
        out = []
        for h, items in zip(values, contents):
            twin = twins.get(h)
            if twin is None:
                if type(h) is not int or h < 0 or type(items) is not list:
                    raise _Broken(f"a list handle {h!r:.20} never given")
                twins[h] = twin = items
                twin_ids[id(items)] = h
            elif twin is not items and twin != items:
                twin[:] = items
            out.append(twin)
        return out

    def proxy_class(self, described: tuple, root: bool) -> type:
        """The proxy class of ``(type id)`` or ``(type id, info)`` (the child describes a type once)."""
        type_id = described[0]
        cls = self.worker.types.get((type_id, root))
        if cls is None:
            info = described[1] if len(described) == 2 else self.worker.infos.get(type_id)
            if not _valid_info(info) or info[0] != type_id:
                raise _Broken(f"a type {described!r:.80}")
            self.worker.infos[type_id] = info
            cls = self.worker.types[(type_id, root)] = _proxy_class(info, root, self.isolation)
        return cls

    def enc(self, v, depth: int = 0):
        """A value of the checker as the child will rebuild it."""
        t = type(v)
        if t in _SCALARS:
            return v
        if depth > _MAX_DEPTH:
            raise InternalError(f"a value nested deeper than {_MAX_DEPTH} levels cannot cross to the implementation")
        if t is list:
            h = self.twin_ids.get(id(v))
            if h is None:
                h = self.next_handle
                self.next_handle -= 1
                self.twins[h] = v
                self.twin_ids[id(v)] = h
            for x in v:
                if type(x) not in _SCALARS:
                    return (_T_LISTX, h, [self.enc(x, depth + 1) for x in v])
            return (_T_LIST, h, v)
        if t is tuple:
            return (_T_TUPLE, *[self.enc(x, depth + 1) for x in v])
        if t is Tuple2:
            return (_T_TUPLE2, self.enc(v.f0, depth + 1), self.enc(v.f1, depth + 1))
        if t is TimeWindow:
            return (_T_WINDOW, self.enc(v.start, depth + 1), self.enc(v.end, depth + 1))
        if t is VoidNamespace:
            return (_T_VOID,)
        if isinstance(v, RemoteObject):
            if v._s is not self:
                raise InternalError("an object of another program was handed to the implementation")
            return (_T_OBJ, v._h)
        name = self.functions.get(id(v))
        if name is not None:
            return (_T_FN, name)
        if t is io.BytesIO:
            self.sinks.append(v)
            return (_T_SINK, len(self.sinks) - 1)
        serializer_id = getattr(v, "serializer_id", None) if t.__module__ == "reference.serializers" else None
        if type(serializer_id) is str:
            return (_T_SERIALIZER, serializer_id)
        if callable(v):
            token = len(self.callbacks) + 1
            self.callbacks[token] = v
            return (_T_CALLBACK, token)
        raise InternalError(f"a {t.__name__} cannot cross to the implementation's process")

    def enc_arg(self, v):
        """An argument: as :meth:`enc`, and a key object the same as the last one passed
        with its value arrives as that same object there."""
        t = type(v)
        if t is int:
            if -5 <= v <= 256:
                return v
            code = v
        elif t is str:
            if len(v) < 2 and (not v or ord(v) < 256):
                return v
            code = v
        elif t is Tuple2 or t is TimeWindow:
            code = self.enc(v)
        else:
            return self.enc(v)
        key = (t, v)
        if self.memo.get(key) is v:
            return (_T_SAME, code)
        self.memo[key] = v
        return code

    def dec(self, c, depth: int = 0):
        """A value the child sent."""
        t = type(c)
        if t is not tuple:
            if t in _SCALARS:
                return c
            raise _Broken(f"a value of type {t.__name__}")
        if not c or depth > _MAX_DEPTH + 2:
            raise _Broken("an empty or too deep value")
        tag = c[0]
        if tag == _T_LIST or tag == _T_LISTX:
            h, content = c[1], c[2]
            if type(h) is not int:
                raise _Broken("a list without a handle")
            if tag == _T_LIST:
                items = content
            elif type(content) is list:
                items = [self.dec(x, depth + 1) for x in content]
            else:
                items = self.dec(content, depth + 1)
            if type(items) is not list:
                raise _Broken("a list without content")
            twin = self.twins.get(h)
            if twin is None:
                if h < 0:
                    raise _Broken(f"a list handle {h} never given")
                self.twins[h] = items
                self.twin_ids[id(items)] = h
                return items
            if twin is not items and twin != items:
                twin[:] = items
            return twin
        if tag == _T_TUPLE:
            return tuple([self.dec(x, depth + 1) for x in c[1:]])
        if tag == _T_OBJ:
            h = c[1]
            if type(h) is not int or len(c) not in (3, 5):
                raise _Broken("an object without its handle and type")
            if len(c) == 5:
                if type(c[4]) is not dict:
                    raise _Broken("attributes that are not a dict")
                self.plain[h] = c[4]
            proxy = self.proxies.get(h)
            if proxy is not None:
                return proxy
            return self.proxy(h, self.proxy_class(c[2:4] if c[3] is not None else c[2:3], root=False))
        if tag == _T_ENTRIES:
            columns = [self._column(column, depth) for column in c[1:]]
            if len(columns) != 3 or len({len(column) for column in columns}) != 1:
                raise _Broken("entries whose columns differ")
            return list(zip(*columns))
        if tag == _T_TUPLE2 or tag == _T_WINDOW:
            if len(c) != 3:
                raise _Broken(f"a key of {len(c) - 1} fields")
            a, b = c[1], c[2]
            a = a if type(a) in _SCALARS else self.dec(a, depth + 1)
            b = b if type(b) in _SCALARS else self.dec(b, depth + 1)
            return Tuple2(a, b) if tag == _T_TUPLE2 else TimeWindow(a, b)
        if tag == _T_VOID:
            return VOID_NAMESPACE
        if tag == _T_CALLABLE:
            return _CALLABLE
        raise _Broken(f"a value tagged {tag!r:.20}")


def _valid_info(info) -> bool:
    return (type(info) is tuple and len(info) == 6 and type(info[1]) is str and info[1].isidentifier()
            and all(type(group) is tuple and all(type(m) is str and m.isidentifier() and not m.startswith("__")
                                                 for m in group) for group in (info[2], info[5]))
            and type(info[3]) is tuple and all(d in _DUNDERS for d in info[3]))


_CALLABLE = object()  # what an attribute read gives for a callable attribute (then called by name)


# ------------------------------------------------------------------ helpers for the harness


def take(iterable, n: int, into: list | None = None) -> list:
    """``list(islice(iterable, n))`` (or those items appended to ``into``, which is returned;
    if the iteration raises, the items before the error are in ``into``). An iterator in
    the implementation's process answers with one request, as the same ``next()`` calls."""
    if isinstance(iterable, RemoteObject) and callable(getattr(type(iterable), "__next__", None)):
        items, error = iterable._s.drain(iterable._h, n)
        if into is not None:
            into.extend(items)
        if error is not None:
            raise error
        return items if into is None else into
    if into is None:
        return list(islice(iterable, n))
    into.extend(islice(iterable, n))
    return into


def expect_calls(impl, name: str, calls: list) -> None:
    """The harness is about to call ``impl.name(*args)`` for each ``args`` of ``calls``, in
    order and with nothing between them (``get_range``): an implementation in another
    process runs them all in one request. Nothing happens for any other implementation."""
    if isinstance(impl, RemoteObject) and len(calls) > 1 and callable(getattr(type(impl), name, None)):
        impl._s.prefetch(impl._h, name, calls)


def changed_in_place(impl, state: list) -> None:
    """The harness changed ``state``, a list the implementation handed out some requests ago,
    in place: an implementation in another process gets the change before its next request
    (as it gets one the harness makes right after the call that returned the list). Nothing
    happens for any other implementation."""
    if isinstance(impl, RemoteObject):
        impl._s.watch.append((state, None))  # None: never equal to the list, so it is synced


def hidden_methods(impl) -> frozenset | None:
    """The methods an implementation in another process has but the checker does not use
    there (:attr:`Isolation.hidden`, e.g. ``introspect``); None for one in this process."""
    return type(impl)._hidden if isinstance(impl, RemoteObject) else None


class RemoteFactory:
    """The factory of a ``MODULE:FACTORY`` spec whose implementation runs in a process of its
    own: calling it builds one there and returns its proxy (and starts the next program)."""

    def __init__(self, module: str, attribute: str, isolation: Isolation) -> None:
        self.module, self.attribute, self.isolation = module, attribute, isolation
        self.__module__ = module
        self.__name__ = self.__qualname__ = attribute

    @property
    def worker(self) -> Worker:
        return worker_for(self.module, self.attribute, self.isolation)

    def __call__(self, *args, **kwargs):
        current = _WORKERS.get((self.module, self.attribute))
        if current is not None and current.streaming:  # a walk abandoned while it ran ahead
            current.kill()
        elif current is not None and current.owed:  # the end of the last walk, read now
            current.collect()
        try:
            worker = self.worker
        except ImportFailed as exc:
            raise WorkerFailure(f"restarting it failed: {exc}") from None
        worker.generation += 1
        return Session(worker, self.isolation).new(args, kwargs)

    def __repr__(self) -> str:
        return f"<{self.module}.{self.attribute} in a process of its own>"


def remote_factory(module: str, attribute: str, isolation: Isolation) -> RemoteFactory:
    """The factory of ``module:attribute`` in its own process, its child started (the module
    imported there, under the step time limit); ImportFailed if it cannot be."""
    implementation_call(worker_for, module, attribute, isolation)
    return RemoteFactory(module, attribute, isolation)


# ------------------------------------------------------------------ the child


def _child_main(parent: int, rfd: int, wfd: int, module: str, attribute: str, isolation: Isolation) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the checker's to handle
    no_user_here()
    for number in (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the checker
    except Exception:
        pass
    if os.getppid() != parent:
        return
    os.dup2(2, 1)  # what the implementation prints goes to stderr: stdout is the checker's report
    keep = sorted({0, 1, 2, rfd, wfd})
    for low, high in zip(keep, keep[1:] + [_max_fd()]):
        os.closerange(low + 1, high)
    gc.freeze()  # the collector need not walk (and so copy) the pages inherited from the checker
    channel = _Channel(rfd, wfd)
    try:
        factory = getattr(importlib.import_module(module), attribute, None)
    except BaseException as exc:
        channel.send((_IMPORT_ERROR, f"cannot import module {module!r} ({raised_text(exc)[:_TEXT]})"))
        return
    if not callable(factory):
        channel.send((_IMPORT_ERROR, f"module {module!r} has no callable {attribute!r}"
                                     f"{did_you_mean(attribute, callables_of(sys.modules.get(module)))}"))
        return
    channel.send((_READY, os.getpid()))
    _Server(channel, factory, isolation).serve()


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 4096


class _Server:
    """The child's side of a program: the implementation's objects by handle."""

    copies = False  # whether a list's content is copied when encoded (it is sent at once: no need)

    def __init__(self, channel: _Channel, factory: Callable, isolation: Isolation) -> None:
        self.channel = channel
        self.factory = factory
        self.isolation = isolation
        self.functions = isolation.known()
        self.info: dict = {}  # type -> its info (computed once per type, sent once)
        self.readable: dict = {}  # type -> what _readable says of it
        self.sent_types: set = set()
        self.poisoned = False
        self.reset()

    def reset(self) -> None:
        self.objects: dict = {}
        self.handles: dict = {}  # id(object) -> handle (the objects are held: ids stay theirs)
        self.next_handle = 1
        self.memo: dict = {}
        self.top = None  # the program's implementation
        self.measured = False  # whether its len() goes with every answer
        self.sinks: list = []

    def serve(self) -> None:
        while True:
            try:
                message = self.channel.receive()
            except (EOFError, OSError, _Broken):
                return
            if type(message) is tuple and message and message[0] == _BATCH:
                self.batch(message)
            else:
                return

    def send(self, message) -> None:
        self.channel.send(message)

    def batch(self, message) -> None:
        _, deferred, final = message
        if not self.poisoned:
            for request in deferred:
                try:
                    self.run(request)
                except _Broken as exc:
                    self.send((_ANSWER, _PROTOCOL, str(exc), None, ()))
                    self.poisoned = True
                    break
                except BaseException as exc:
                    self.send((_ANSWER, _LATE, _exception_info(exc), None, ()))
                    self.poisoned = True
                    break
        if final is None:
            return
        if final[0] == _NEW:
            self.poisoned = False
        elif self.poisoned:
            self.send((_ANSWER, _SKIPPED, None, None, ()))
            return
        self.sinks = []
        try:
            value = self.run(final)
            status, code = _OK, self.enc_top(value)
        except _Broken as exc:
            self.send((_ANSWER, _PROTOCOL, str(exc), None, ()))
            return
        except BaseException as exc:
            status, code = _ERR, _exception_info(exc)
        length = self.length() if final[0] not in (_NEW, _WALK) else None
        self.send((_ANSWER, status, code, length, tuple(sink.getvalue() for sink in self.sinks)))

    def enc_top(self, value):
        try:
            return self.enc(value)
        except RecursionError:
            raise
        except _Broken:
            raise

    def length(self):
        if not self.measured:
            return None
        try:
            return (True, len(self.top))
        except BaseException as exc:
            return (False, _exception_info(exc))

    def obj(self, handle):
        try:
            return self.objects[handle]
        except (KeyError, TypeError):
            raise _Broken(f"no object {handle!r:.20} in this program") from None

    def run(self, request):
        op = request[0]
        if op == _CALL:
            _, handle, name, args, kwargs = request
            target = getattr(self.obj(handle), name)
            return target(*[self.dec_arg(a) for a in args],
                          **({k: self.dec_arg(v) for k, v in kwargs.items()} if kwargs else {}))
        if op == _OP:
            _, handle, name, args, kwargs = request
            target = self.obj(handle)
            fn = _OPS.get(name)
            if fn is None:
                raise _Broken(f"no operation {name!r:.20}")
            return fn(target, *[self.dec_arg(a) for a in args],
                      **({k: self.dec_arg(v) for k, v in kwargs.items()} if kwargs else {}))
        if op == _NOP:
            return None
        if op == _FOLLOWED:
            _, handle, name, args, kwargs, then = request
            if self.isolation.followed.get(name) != then:
                raise _Broken(f"{name!r:.20} is not followed by {then!r:.20}")
            target = self.obj(handle)
            value = getattr(target, name)(*[self.dec_arg(a) for a in args],
                                          **({k: self.dec_arg(v) for k, v in kwargs.items()} if kwargs else {}))
            first = self.enc(value)
            if value is not True:  # only a plain True: nothing of the object's own runs to decide
                return _Encoded((first, None))
            try:
                outcome = (True, self.enc(getattr(target, then)()))
            except _Broken:
                raise
            except BaseException as exc:
                outcome = (False, _exception_info(exc))
            return _Encoded((first, outcome))
        if op == _WALK:
            if _AHEAD is None:
                raise _Broken("no walks run ahead here")
            _AHEAD(self, *request[1:])
            return None
        if op == _GETATTR:
            value = getattr(self.obj(request[1]), request[2])
            return _Callable if callable(value) else value
        if op == _DRAIN:
            items, exc = _next_items(self.obj(request[1]), request[2])
            return _Drained(items, _exception_info(exc) if exc is not None else None)
        if op == _CALLS:
            _, handle, name, calls = request
            target = self.obj(handle)
            outcomes = []
            for args in calls:
                try:
                    value = getattr(target, name)(*[self.dec_arg(a) for a in args])
                    outcomes.append((True, self.enc(value)))
                except _Broken:
                    raise
                except BaseException as exc:
                    outcomes.append((False, _exception_info(exc)))
                    break
            return _Encoded(outcomes)
        if op == _SYNC:
            for code in request[1]:
                self.dec(code)
            return None
        if op == _NEW:
            self.reset()
            _, args, kwargs = request
            value = self.factory(*[self.dec_arg(a) for a in args], **{k: self.dec_arg(v) for k, v in kwargs.items()})
            self.top = value
            self.measured = callable(getattr(type(value), "__len__", None))
            return value
        raise _Broken(f"no request {op!r:.20}")

    # ------------------------------------------------------- values

    def enc(self, v, depth: int = 0):
        t = type(v)
        if t in _SCALARS:
            return v
        if t is _Encoded:
            return v.codes
        if t is _Drained:
            return (self.enc_items(v.items, depth), v.error)
        if v is _Callable:
            return (_T_CALLABLE,)
        if depth < _MAX_DEPTH:
            if t is list:
                h = self.handles.get(id(v))
                if h is None:
                    h = self.next_handle
                    self.next_handle += 1
                    self.handles[id(v)] = h
                    self.objects[h] = v
                for x in v:
                    if type(x) not in _SCALARS:
                        return (_T_LISTX, h, self.enc_items(v, depth))
                return (_T_LIST, h, v[:] if self.copies else v)
            if t is Tuple2 or t is TimeWindow:
                a, b = (v.f0, v.f1) if t is Tuple2 else (v.start, v.end)
                return (_T_TUPLE2 if t is Tuple2 else _T_WINDOW, a if type(a) in _SCALARS else self.enc(a, depth + 1),
                        b if type(b) in _SCALARS else self.enc(b, depth + 1))
            if t is tuple:
                return (_T_TUPLE, *[self.enc(x, depth + 1) for x in v])
        if v is VOID_NAMESPACE:
            return (_T_VOID,)
        h = self.handles.get(id(v))
        if h is None:
            h = self.next_handle
            self.next_handle += 1
            self.handles[id(v)] = h
            self.objects[h] = v
            return (_T_OBJ, h, id(t), self.describe(t), self.plain(v, t))
        return (_T_OBJ, h, id(t))

    def describe(self, cls: type):
        """The type's info, the first time it crosses (None afterwards)."""
        if cls in self.sent_types:
            return None
        info = self.type_info(cls)
        self.sent_types.add(cls)
        return info

    def plain(self, obj, cls: type) -> dict:
        """The attributes of a new object that reading would give without running its code
        (its instance dict and slots, where no descriptor or __getattribute__ of its type
        intervenes), of plain values: so reading them costs no request while nothing changes."""
        names = self.readable.get(cls)
        if names is None:
            names = self.readable[cls] = _readable(cls)
        if not names:
            return {}
        slots, data_descriptors = names
        out = {}
        for name, member in slots:
            try:
                value = member.__get__(obj, cls)
            except AttributeError:
                continue
            if type(value) in _SCALARS:
                out[name] = value
        if data_descriptors is not None:
            try:
                instance = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                return out
            for name, value in instance.items():
                if type(name) is str and type(value) in _SCALARS and name not in data_descriptors:
                    out[name] = value
        return out

    def enc_items(self, items: list, depth: int):
        """Items of a list or an iteration; a list of (key, namespace, state) entries by columns."""
        if len(items) > 2:
            for e in items:
                if type(e) is not tuple or len(e) != 3:
                    break
            else:
                return (_T_ENTRIES, *[self.column([e[i] for e in items], depth) for i in range(3)])
        return [self.enc(x, depth + 1) for x in items]

    def column(self, values: list, depth: int) -> tuple:
        """``(0, values)`` of plain values; ``(2, handles, contents)`` of lists of plain
        values (the states of entries); else ``(1, codes)``."""
        for x in values:
            if type(x) not in _SCALARS:
                break
        else:
            return (0, values)
        handles, objects = self.handles, self.objects
        numbers, contents = [], []
        for v in values:
            if type(v) is not list:
                return (1, [self.enc(x, depth + 1) for x in values])
            for x in v:
                if type(x) not in _SCALARS:
                    return (1, [self.enc(x, depth + 1) for x in values])
            h = handles.get(id(v))
            if h is None:
                h = self.next_handle
                self.next_handle += 1
                handles[id(v)] = h
                objects[h] = v
            numbers.append(h)
            contents.append(v[:] if self.copies else v)
        return (2, numbers, contents)

    def type_info(self, cls: type) -> tuple:
        info = self.info.get(cls)
        if info is None:
            methods, dunders, hidden = [], [], []
            for name in dir(cls):
                if name.startswith("__") or not name.isidentifier():
                    continue
                try:
                    member = inspect.getattr_static(cls, name)
                except AttributeError:
                    continue
                if isinstance(member, (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                                       staticmethod, classmethod, types.WrapperDescriptorType,
                                       types.MethodWrapperType)):
                    (hidden if name in self.isolation.hidden else methods).append(name)
            has = lambda name: getattr(cls, name, None) is not None  # noqa: E731
            if has("__len__"):
                dunders.append("__len__")
            if has("__iter__") or has("__getitem__"):
                dunders.append("__iter__")
            for name in ("__next__", "__contains__", "__getitem__", "__call__"):
                if has(name):
                    dunders.append(name)
            if has("__bool__") or has("__len__"):
                dunders.append("__bool__")
            self_iter = cls.__module__ == "builtins" and has("__next__") or issubclass(cls, types.GeneratorType)
            name = cls.__name__ if isinstance(cls.__name__, str) and cls.__name__.isidentifier() else "object"
            info = self.info[cls] = (id(cls), name, tuple(methods), tuple(dunders), bool(self_iter), tuple(hidden))
        return info

    def dec(self, c):
        t = type(c)
        if t is not tuple:
            return c
        tag = c[0]
        if tag == _T_LIST or tag == _T_LISTX:
            h, content = c[1], c[2]
            items = content if tag == _T_LIST else [self.dec(x) for x in content]
            obj = self.objects.get(h)
            if obj is None:
                self.objects[h] = items
                self.handles[id(items)] = h
                return items
            if type(obj) is list and obj != items:
                obj[:] = items
            return obj
        if tag == _T_TUPLE:
            return tuple([self.dec(x) for x in c[1:]])
        if tag == _T_OBJ:
            return self.obj(c[1])
        if tag == _T_TUPLE2:
            return Tuple2(self.dec(c[1]), self.dec(c[2]))
        if tag == _T_WINDOW:
            return TimeWindow(self.dec(c[1]), self.dec(c[2]))
        if tag == _T_VOID:
            return VOID_NAMESPACE
        if tag == _T_FN:
            fn = self.functions.get(c[1])
            if fn is None:
                raise _Broken(f"no function {c[1]!r:.40}")
            return fn
        if tag == _T_CALLBACK:
            return self.stub(c[1])
        if tag == _T_SINK:
            sink = io.BytesIO()
            self.sinks.append(sink)
            return sink
        if tag == _T_SERIALIZER:
            return serializer_from_id(c[1])
        if tag == _T_SAME:
            value = self.dec(c[1])
            try:
                return self.memo[(type(value), value)]
            except KeyError:
                raise _Broken(f"no earlier key {value!r:.40}") from None
        raise _Broken(f"a value tagged {tag!r:.20}")

    def dec_arg(self, c):
        value = self.dec(c)
        if _memoable(value) and not (type(c) is tuple and c[0] == _T_SAME):
            self.memo[(type(value), value)] = value
        return value

    def stub(self, token: int):
        """A function of the checker, called back."""

        def call_back(*args):
            self.send((_CALLBACK, token, [self.enc(a) for a in args]))
            while True:
                message = self.channel.receive()
                if type(message) is tuple and message and message[0] == _REPLY:
                    _, status, payload, changed = message
                    for code in changed:
                        self.dec(code)
                    if status == _OK:
                        return self.dec(payload)
                    raise _checker_error(payload)
                if type(message) is tuple and message and message[0] == _BATCH:
                    self.batch(message)  # the function asked the implementation something meanwhile
                    continue
                raise _Broken(f"a message {message!r:.60} while waiting for a callback's reply")

        return call_back


def _readable(cls: type):
    """``(slots, data descriptor names or None)`` of a type whose attribute reads of slots and
    instance dict entries run no code of its own; () if its reads may run its code."""
    try:
        if cls.__getattribute__ is not object.__getattribute__:
            return ()
        slots, data = [], set()
        for klass in cls.__mro__:
            for name, member in vars(klass).items():
                if isinstance(member, types.MemberDescriptorType):
                    slots.append((name, member))
                elif hasattr(type(member), "__set__") or hasattr(type(member), "__delete__"):
                    data.add(name)
        has_dict = any(isinstance(vars(klass).get("__dict__"), types.GetSetDescriptorType) for klass in cls.__mro__)
        return (tuple(slots), frozenset(data) if has_dict else None)
    except Exception:
        return ()


_AHEAD: Callable | None = None  # runs a walk ahead in the child (properties.core.ahead registers it)


def register_ahead(run: Callable) -> None:
    """``run(server, root handle, machine, harness options, steps)``: how the child runs a walk ahead."""
    global _AHEAD
    _AHEAD = run


def _next_items(iterator, n: int) -> tuple[list, BaseException | None]:
    """At most ``n`` items of ``iterator`` (fewer where it ends), and what it raised instead, if anything."""
    items = []
    try:
        for _ in range(n):
            items.append(next(iterator))
    except StopIteration:
        pass
    except BaseException as exc:
        return items, exc
    return items, None


class _Encoded:
    """Codes already encoded (a CALLS answer)."""

    __slots__ = ("codes",)

    def __init__(self, codes) -> None:
        self.codes = codes


class _Drained:
    __slots__ = ("items", "error")

    def __init__(self, items, error) -> None:
        self.items, self.error = items, error


_Callable = object()  # GETATTR's answer for a callable attribute


def _checker_error(info) -> BaseException:
    """In the child: the exception a function of the checker raised (carrying its token, so
    that if it propagates out of the implementation the checker re-raises the original)."""
    name, base, text, _, token = info
    base_class = getattr(builtins, base, None)
    if not (isinstance(base_class, type) and issubclass(base_class, Exception)):
        base_class = Exception
    cls = type(name, (base_class,), {"__str__": lambda self: text})
    exc = cls.__new__(cls)
    exc.args = (text,)
    exc._cowcheck_token = token
    return exc


_OPS = {
    "len": len, "iter": iter, "next": next, "repr": repr, "str": str, "bool": bool, "hash": hash,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "contains": operator.contains, "getitem": operator.getitem, "call": lambda obj, *a, **k: obj(*a, **k),
    "deepcopy": copy.deepcopy, "copy": copy.copy,
}
