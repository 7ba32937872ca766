"""An implementation in a process of its own: proxies in the checker, a server beside the implementation.

The checker (harness, model, verdict) never imports a user's module: a
:class:`Worker` forks a child that imports it and serves requests over two
pipes; the checker holds proxies (:class:`~cowcheck.core.session.RemoteObject`) that speak the
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
(:class:`~cowcheck.core.boundary.LateError`), a CRASH of the same step.
A walk run ahead (:mod:`cowcheck.core.ahead`) is one request whose
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
  RuntimeError), marked :class:`~cowcheck.core.boundary.ImplementationError`;
  a BaseException there (``SystemExit``...) comes back as an Exception that
  says so;
- **functions** the checker passes: those both sides know by name
  (:class:`~cowcheck.core.wire.Isolation` ``functions``: ``copy.deepcopy``, snapshot transformers)
  run in the child; any other is called back: the child asks, the checker runs
  it on the twins and answers (``transform``'s function records what it was given);
- an output stream becomes a stream in the child whose bytes are written to
  the checker's after the call; a serializer of :mod:`cowcheck.reference.serializers`
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

This module is the checker's entry (:class:`Worker`, the factory, the
harness's helpers); the protocol's messages, tags and channel are in
:mod:`cowcheck.core.wire`, the proxies and a program's :class:`~cowcheck.core.session.Session`
in :mod:`cowcheck.core.session`, the child's server in :mod:`cowcheck.core.child`.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from itertools import islice

from cowcheck.core.boundary import WORKER_PROTOCOL, WorkerFailure
from cowcheck.core.child import _child_main
from cowcheck.core.limits import StepTimeout, current_limit, implementation_call, unpaced
from cowcheck.core.processes import describe_wait_status
from cowcheck.core.session import RemoteObject, Session
from cowcheck.core.wire import _ANSWER, _CALLBACK, _IMPORT_ERROR, _LATE, _READY, _STEP, Isolation, _Broken, _Channel

__all__ = ["RemoteFactory", "ImportFailed", "take", "expect_calls", "changed_in_place",
           "hidden_methods", "shutdown_workers", "remote_factory"]


class ImportFailed(Exception):
    """The module could not be imported in its process, or has no such callable; ``str()`` says why."""


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
        self.streaming = False  # it runs a walk ahead (cowcheck.core.ahead): no request until it ends
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
            with unpaced():  # (a process that starts slowly on a loaded machine is no hang: the full limit)
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
