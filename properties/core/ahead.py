"""Walks run ahead in the implementation's process, checked step by step by the checker's own harness.

Asking an implementation in another process call by call costs a round trip
per call (:mod:`properties.core.remote`): fine for Hypothesis, whose own
cost per step is larger, too slow for the walk phase. So a walk's program is
sent to the implementation's process at once, and there the very harness of
the checker runs it over the implementation, through proxies of the same
classes as the checker's, each call made at once (in-process semantics) and
recorded (:class:`Recorder`): what was called with what, what it returned or
raised, what the harness's own functions were given (``transform``). The
records stream back a step at a time while the next steps run.

The checker's harness then applies the same steps over a :class:`Replay`
of the implementation: every call it makes is matched with the next record
(the call, its target, its arguments) and answered from it. Every verdict is
the checker's harness's own, on what the implementation did; nothing the
other process says about passing or failing is used. A call that does not
match the record (a module that patched the harness over there, a map whose
answers depend on something the records do not carry) is :class:`OutOfStep`:
the checker drops the records and runs the walk again from its first step,
live (call by call), and goes on live. A failure found on the records is
confirmed the same way before it is reported (a TIMEOUT, or the process's
end, the checker saw itself). So a walk costs one request and runs on two
cores; the verdict is the one a live walk gives.

Each step's record is read inside that step, under the step time limit: a
hang or a crash of the implementation shows at the step that caused it.
"""

from __future__ import annotations

import io
from collections import deque

from properties.core.boundary import WORKER_EXIT, WORKER_PROTOCOL, OutOfStep, WorkerFailure, build
from properties.core.failures import TIMEOUT, CheckFailure
from properties.core.limits import StepTimeout, implementation_call, implementation_calls
from properties.core.machine import machine_kind
from properties.core.processes import describe_wait_status
from properties.core.program import Step
from properties.core.remote import (_ANSWER, _BATCH, _OPS, _SCALARS, _STEP, _T_CALLABLE, _T_CALLBACK,
                                    _T_FN, _T_LIST, _T_LISTX, _T_OBJ, _T_SERIALIZER, _T_SINK, _T_TUPLE, _T_TUPLE2,
                                    _T_VOID, _T_WINDOW, _WALK, RemoteObject, Session, _Bound, _Broken, _next_items,
                                    _exception_info, _proxy_class, _Server, register_ahead)
from reference.keys import TimeWindow, Tuple2, VoidNamespace

__all__ = ["AheadHarness", "Recorder", "Replay", "ahead_harness"]

_ROOT = 1  # the implementation's handle in a walk's records
_PLAIN = _SCALARS | {Tuple2, TimeWindow, VoidNamespace}


class _Unrecordable(Exception):
    """A value the records cannot carry faithfully (the walk goes on live)."""


# ------------------------------------------------------------------ steps as data


def _plain(v):
    t = type(v)
    if t in _SCALARS:
        return v
    if t is list:
        return [_plain(x) for x in v]
    if t is tuple:
        return (_T_TUPLE, *[_plain(x) for x in v])
    if t is Tuple2:
        return (_T_TUPLE2, _plain(v.f0), _plain(v.f1))
    if t is TimeWindow:
        return (_T_WINDOW, v.start, v.end)
    if t is VoidNamespace:
        return (_T_VOID,)
    raise _Unrecordable(f"a step argument of type {t.__name__}")


def _unplain(c):
    t = type(c)
    if t is list:
        return [_unplain(x) for x in c]
    if t is not tuple:
        return c
    tag = c[0]
    if tag == _T_TUPLE:
        return tuple(_unplain(x) for x in c[1:])
    if tag == _T_TUPLE2:
        return Tuple2(_unplain(c[1]), _unplain(c[2]))
    if tag == _T_WINDOW:
        return TimeWindow(c[1], c[2])
    if tag == _T_VOID:
        from reference.keys import VOID_NAMESPACE
        return VOID_NAMESPACE
    raise _Broken(f"a step argument tagged {tag!r:.20}")


# ------------------------------------------------------------------ the implementation's side


class Recorder(_Server):
    """The session of a walk run ahead in the implementation's process: the proxies the
    harness holds are the checker's classes, each call is made on the real object at once
    and appended to :attr:`entries` as ``[kind, handle, name, arguments, outcome,
    invocations, written]``: kind ``c`` a method call, ``o`` an operation (``len``,
    ``iter``, ``eq``...), ``a`` an attribute read, ``d`` ``n`` items of an iterator
    (``take``); ``invocations``: what the harness's own functions were given and returned
    during the call; ``written``: the bytes a call wrote to output streams."""

    copies = True  # records are sent after the step: a list's content is taken when it crosses

    def __init__(self, server: _Server) -> None:
        self.server = server
        self.isolation = server.isolation
        self.functions = server.functions
        self.function_names = {id(fn): name for name, fn in self.functions.items()}
        self.info = server.info
        self.readable = {}
        self.sent_types = set()
        self.classes: dict = {}
        self.entries: list = []
        self.reset()

    def plain(self, obj, cls: type) -> dict:
        return {}  # the checker replays attribute reads one by one

    def wrap_root(self, obj):
        self.objects[_ROOT] = obj
        self.handles[id(obj)] = _ROOT
        self.next_handle = _ROOT + 1
        return self._proxy(_ROOT, type(obj), root=True)

    def _proxy(self, handle: int, cls: type, root: bool = False):
        klass = self.classes.get((cls, root))
        if klass is None:
            klass = self.classes[(cls, root)] = _proxy_class(self.type_info(cls), root, self.isolation)
        proxy = object.__new__(klass)
        proxy._s, proxy._h = self, handle
        return proxy

    def wrap(self, value):
        """What the harness gets for ``value`` (encoded already): the checker's view of it."""
        t = type(value)
        if t in _PLAIN:
            return value
        if t is list:
            for x in value:
                if type(x) not in _PLAIN and type(x) is not tuple:
                    raise _Unrecordable("a list holding objects")
            return value
        if t is tuple:
            for x in value:
                if type(x) not in _PLAIN and type(x) is not list:
                    return tuple([self.wrap(x) for x in value])
            return value
        return self._proxy(self.handles[id(value)], t)

    def wrap_all(self, items: list) -> list:
        for x in items:
            if type(x) is not tuple:
                return [self.wrap(x) for x in items]
            for y in x:
                if type(y) not in _PLAIN and type(y) is not list:
                    return [self.wrap(x) for x in items]
        return items

    # ------------------------------------------------- the session's interface

    def call(self, handle, name, args, kwargs):
        target = self.obj(handle)
        entry = ["c", handle, name, None, None, (), ()]
        real, entry[3] = self._arguments(args, kwargs, entry)
        self.entries.append(entry)
        try:
            value = getattr(target, name)(*real[0], **real[1])
        except BaseException as exc:
            self._raised(entry, exc)
            raise
        return self._returned(entry, value)

    defer = call

    def followed(self, handle, name, then, args, kwargs):
        return self.call(handle, name, args, kwargs)  # recorded, and replayed, call by call

    def op(self, handle, name, *args, **kwargs):
        target = self.obj(handle)
        entry = ["o", handle, name, None, None, (), ()]
        real, entry[3] = self._arguments(args, kwargs, entry)
        self.entries.append(entry)
        try:
            value = _OPS[name](target, *real[0], **real[1])
        except BaseException as exc:
            self._raised(entry, exc)
            raise
        return self._returned(entry, value)

    def iter(self, handle):
        return self.op(handle, "iter")

    def root_len(self, handle):
        return self.op(handle, "len")

    def getattr(self, handle, name):
        if name in self.isolation.hidden:
            raise AttributeError(name)
        target = self.obj(handle)
        entry = ["a", handle, name, ([], {}), None, (), ()]
        self.entries.append(entry)
        try:
            value = getattr(target, name)
        except BaseException as exc:
            entry[4] = (False, _exception_info(exc))
            raise
        if callable(value):
            entry[4] = (True, (_T_CALLABLE,))
            return _Bound(self, handle, name)
        entry[4] = (True, self.enc(value))
        return self.wrap(value)

    def drain(self, handle, n: int):
        iterator = self.obj(handle)
        entry = ["d", handle, n, ([], {}), None, (), ()]
        self.entries.append(entry)
        items, error = _next_items(iterator, n)
        info = _exception_info(error) if error is not None else None
        entry[4] = (True, (self.enc_items(items, 0), info))
        return self.wrap_all(items), error

    def prefetch(self, handle, name, calls) -> None:
        pass  # the calls are recorded as they are made

    # ------------------------------------------------- recording

    def _arguments(self, args, kwargs, entry: list):
        """``((args, kwargs) the implementation is given, (their codes for the record))``."""
        real, codes = [], []
        context = None
        for v in args:
            t = type(v)
            if t in _SCALARS:
                real.append(v)
                codes.append(v)
            elif t is list or t is Tuple2 or t is TimeWindow or t is VoidNamespace:
                real.append(v)
                codes.append(self.enc(v))
            else:
                context = context or _Context(entry)
                r, c = self._translate(v, context)
                real.append(r)
                codes.append(c)
        kw_real, kw_codes = {}, {}
        for key, v in (kwargs or {}).items():
            context = context or _Context(entry)
            kw_real[key], kw_codes[key] = self._translate(v, context)
        if context is not None:
            entry[5], entry[6] = context.invocations, context.sinks
        return (real, kw_real), (codes, kw_codes)

    def _raised(self, entry: list, exc: BaseException) -> None:
        entry[4] = (False, _exception_info(exc))
        if entry[6]:
            entry[6] = tuple(stream.getvalue() for stream in entry[6])

    def _returned(self, entry: list, value):
        t = type(value)
        if t in _SCALARS:
            entry[4] = (True, value)
        else:
            entry[4] = (True, self.enc(value))
        if entry[6]:
            entry[6] = tuple(stream.getvalue() for stream in entry[6])
        return value if t in _PLAIN else self.wrap(value)

    def _translate(self, v, context: "_Context"):
        """(what the implementation is given for the harness's ``v``, the record's code)."""
        t = type(v)
        if t in _SCALARS:
            return v, v
        if t is list or t is Tuple2 or t is TimeWindow or t is VoidNamespace:
            return v, self.enc(v)
        if t is tuple:
            parts = [self._translate(x, context) for x in v]
            return tuple(p[0] for p in parts), (_T_TUPLE, *[p[1] for p in parts])
        if isinstance(v, RemoteObject):
            if v._s is not self:
                raise _Unrecordable("an object of another walk")
            return self.obj(v._h), (_T_OBJ, v._h)
        name = self.function_names.get(id(v))
        if name is not None:
            return v, (_T_FN, name)
        if t is io.BytesIO:
            context.sinks.append(v)
            return v, (_T_SINK, len(context.sinks) - 1)
        serializer_id = getattr(v, "serializer_id", None) if t.__module__ == "reference.serializers" else None
        if type(serializer_id) is str:
            return v, (_T_SERIALIZER, serializer_id)
        if callable(v):
            context.functions += 1
            return self._recording(v, context.functions, context.invocations), (_T_CALLBACK, context.functions)
        raise _Unrecordable(f"an argument of type {t.__name__}")

    def _recording(self, fn, token: int, invocations: list):
        """``fn`` (a function of the harness) as the implementation calls it: what it was
        given and what it returned, taken at the time."""

        def recorded(*args):
            codes = [self.enc(a) for a in args]
            try:
                result = fn(*args)
            except BaseException as exc:
                invocations.append((token, codes, (False, _exception_info(exc))))
                raise
            invocations.append((token, codes, (True, self.enc(result))))
            return result

        return recorded


class _Context:
    """What an entry's unusual arguments need: the output streams, the harness's functions."""

    __slots__ = ("invocations", "sinks", "functions")

    def __init__(self, entry: list) -> None:
        self.invocations, self.sinks, self.functions = [], [], 0


def run_ahead(server: _Server, root_handle: int, machine: str, options: dict, steps: list) -> None:
    """In the implementation's process: run ``steps`` through ``machine``'s harness over the
    program's implementation, sending each step's record (``(STEP, index, entries,
    status)``: status 0 passed, 1 the harness failed, 2 it stopped) as soon as it is made."""
    recorder = Recorder(server)
    status = 0
    try:
        harness = machine_kind(machine).harness_class(recorder.wrap_root(server.obj(root_handle)), **options)
    except BaseException:
        status = 2
    for index, code in enumerate(steps):
        if status:
            break
        try:
            step = Step(code[0], tuple(_unplain(a) for a in code[1]))
            harness.apply(step)
        except CheckFailure:
            status = 1
        except BaseException:
            status = 2
        entries, recorder.entries = recorder.entries, []
        server.send((_STEP, index, entries, status))


register_ahead(run_ahead)


# ------------------------------------------------------------------ the checker's side


class Replay(Session):
    """The implementation as the checker's harness sees it during a walk run ahead: each
    call is matched with the next record of the step and answered from it
    (:class:`OutOfStep` if it does not match). Identity is kept as live: the same handle
    is the same object (lists the checker hands in become twins of the records')."""

    def __init__(self, worker, isolation, root_class: type) -> None:
        super().__init__(worker, isolation)
        self.root = _ROOT
        self.root_proxy = self.proxy(_ROOT, root_class)
        self.records: deque = deque()
        self.index = -1
        self.loaded = False
        self.ended = False
        self.status = 0  # of the last record read: 1 the harness over there failed at its step, 2 it stopped

    def begin(self, index: int) -> None:
        self.index, self.loaded, self.records = index, False, deque()

    def load(self) -> None:
        """The step's record, read now (before the harness asks for it)."""
        if not self.loaded:
            self._load()

    def end(self) -> None:
        """After the harness applied the step: its record must be used up."""
        if not self.loaded:
            self._load()
        if self.records:
            raise OutOfStep(f"step {self.index}: the harness made fewer calls than the walk recorded")

    def finish(self) -> bool:
        """After the last step: whether the walk ended there too (its end read)."""
        if self.ended:
            return True
        message = self._receive()
        if type(message) is tuple and message and message[0] == _ANSWER:
            self.ended = True
            return True
        return False

    def _receive(self):
        worker = self.worker
        try:
            return worker.channel.receive()
        except (EOFError, OSError):
            self.closed = WorkerFailure(describe_wait_status(worker._reap()))
            raise self.closed from None
        except _Broken as exc:
            worker.kill()
            self.closed = WorkerFailure(f"it sent {exc}", WORKER_PROTOCOL)
            raise self.closed from None
        except BaseException:
            worker.kill()
            raise

    def _load(self) -> None:
        message = self._receive()
        self.loaded = True
        if type(message) is tuple and message and message[0] == _ANSWER:
            self.ended = True
            raise OutOfStep(f"step {self.index}: the walk ended before it")
        if not (type(message) is tuple and len(message) == 4 and message[0] == _STEP and message[1] == self.index
                and type(message[2]) is list):
            raise OutOfStep(f"step {self.index}: a record {message!r:.80}")
        self.records = deque(message[2])
        self.status = message[3]

    def _next(self, kind: str, handle, name) -> list:
        if not self.loaded:
            self._load()
        if not self.records:
            raise OutOfStep(f"step {self.index}: the harness made more calls than the walk recorded")
        entry = self.records.popleft()
        if type(entry) is not list or len(entry) != 7 or entry[1] != handle or entry[2] != name or entry[0] != kind:
            raise OutOfStep(f"step {self.index}: the harness asked {kind} {name!r:.40}, the record has "
                            f"{entry!r:.80}")
        return entry

    # ------------------------------------------------- the session's interface

    def call(self, handle, name, args, kwargs):
        entry = self._next("c", handle, name)
        recorded = entry[3]
        codes = recorded[0] if type(recorded) is tuple and len(recorded) == 2 and type(recorded[0]) is list else None
        if kwargs or codes is None or recorded[1] or len(codes) != len(args):
            self._match_arguments(entry, args, kwargs or {})
        else:
            for code, value in zip(codes, args):
                if type(code) is not type(value) or type(value) not in _SCALARS or code != value:
                    self._match(code, value)
        if entry[5] or entry[6]:
            return self._outcome(entry)
        outcome = entry[4]
        if type(outcome) is tuple and len(outcome) == 2 and outcome[0] is True:
            code = outcome[1]
            return code if type(code) in _SCALARS else self.decoded(code)
        return self._outcome(entry)

    defer = call

    def followed(self, handle, name, then, args, kwargs):
        return self.call(handle, name, args, kwargs)  # recorded, and replayed, call by call

    def op(self, handle, name, *args, **kwargs):
        if self.closed is not None and name in ("repr", "str"):
            return "<an object of a process that ended>"
        entry = self._next("o", handle, name)
        self._match_arguments(entry, args, {})
        return self._outcome(entry)

    def iter(self, handle):
        return self.op(handle, "iter")

    def root_len(self, handle):
        return self.op(handle, "len")

    def getattr(self, handle, name):
        if name in self.isolation.hidden:
            raise AttributeError(name)
        entry = self._next("a", handle, name)
        ok, code = self._checked_outcome(entry)
        if ok and type(code) is tuple and code == (_T_CALLABLE,):
            return _Bound(self, handle, name)
        return self._value(ok, code)

    def drain(self, handle, n: int):
        entry = self._next("d", handle, n)
        ok, code = self._checked_outcome(entry)
        if not ok or type(code) is not tuple or len(code) != 2:
            raise OutOfStep(f"step {self.index}: a drained iteration {code!r:.60}")
        items = self.decoded(code[0]) if type(code[0]) is tuple else [self.decoded(x) for x in code[0]]
        return items, (self.error(code[1]) if code[1] is not None else None)

    def prefetch(self, handle, name, calls) -> None:
        pass  # the calls are recorded one by one

    def decoded(self, code):
        try:
            return self.dec(code)
        except _Broken as exc:
            raise OutOfStep(f"step {self.index}: a record holds {exc}") from None

    def error(self, info) -> BaseException:
        if type(info) is not tuple or len(info) != 5:
            raise OutOfStep(f"step {self.index}: an exception recorded as {info!r:.60}")
        return super().error(info)

    # ------------------------------------------------- matching and answering

    def _checked_outcome(self, entry: list):
        outcome = entry[4]
        if type(outcome) is not tuple or len(outcome) != 2:
            raise OutOfStep(f"step {self.index}: an outcome {outcome!r:.60}")
        return outcome

    def _value(self, ok: bool, code):
        if ok:
            return self.decoded(code)
        raise self.error(code)

    def _outcome(self, entry: list):
        raised = None
        for invocation in entry[5]:
            raised = self._invoke(invocation)
        written = entry[6]
        for sink, data in zip(self.sinks, written if type(written) is tuple else ()):
            if type(data) is bytes:
                sink.write(data)
        self.sinks, self.callbacks = [], {}
        ok, code = self._checked_outcome(entry)
        if not ok and raised is not None and type(code) is tuple and code[:1] == (type(raised).__name__,):
            raise raised  # the harness's function raised, and the implementation let it through
        return self._value(ok, code)

    def _invoke(self, invocation):
        """Call the harness's function as the implementation did during the call: its result
        becomes the object the implementation got back (same handle)."""
        if type(invocation) is not tuple or len(invocation) != 3:
            raise OutOfStep(f"step {self.index}: an invocation {invocation!r:.60}")
        token, codes, (ok, code) = invocation
        fn = self.callbacks.get(token)
        if fn is None:
            raise OutOfStep(f"step {self.index}: an invocation of a function the harness did not pass")
        values = [self.decoded(c) for c in codes]
        try:
            result = fn(*values)
        except Exception as exc:
            if ok:
                raise OutOfStep(f"step {self.index}: the harness's function raised, the record says it "
                                f"returned") from None
            return exc
        if not ok:
            raise OutOfStep(f"step {self.index}: the harness's function returned, the record says it raised")
        self._match(code, result)
        return None

    def _match_arguments(self, entry: list, args, kwargs: dict) -> None:
        recorded = entry[3]
        if type(recorded) is not tuple or len(recorded) != 2:
            raise OutOfStep(f"step {self.index}: arguments {recorded!r:.60}")
        codes, kw_codes = recorded
        if len(codes) != len(args) or set(kw_codes) != set(kwargs):
            raise OutOfStep(f"step {self.index}: {entry[2]!r:.40} called with other arguments than recorded")
        for code, value in zip(codes, args):
            self._match(code, value)
        for key, value in kwargs.items():
            self._match(kw_codes[key], value)

    def _match(self, code, v) -> None:
        """``v`` (the checker's) is what the record says the implementation was given;
        a list the checker hands in for the first time becomes the twin of its handle."""
        t = type(v)
        if t in _SCALARS:
            if type(code) is not t or code != v:
                raise OutOfStep(f"step {self.index}: an argument {v!r:.40}, the record has {code!r:.40}")
            return
        if type(code) is not tuple or not code:
            raise OutOfStep(f"step {self.index}: an argument {v!r:.40}, the record has {code!r:.40}")
        tag = code[0]
        if t is list:
            if tag not in (_T_LIST, _T_LISTX):
                raise OutOfStep(f"step {self.index}: a list where the record has {code!r:.40}")
            h = code[1]
            known = self.twin_ids.get(id(v))
            if known is None:
                if h in self.twins:
                    raise OutOfStep(f"step {self.index}: a new list where the record has list {h}")
                self.twins[h] = v
                self.twin_ids[id(v)] = h
            elif known != h:
                raise OutOfStep(f"step {self.index}: list {known} where the record has list {h}")
            content = code[2] if tag == _T_LIST else self.decoded(code[2]) if type(code[2]) is tuple else [
                self.decoded(c) for c in code[2]]
            if content != v:
                raise OutOfStep(f"step {self.index}: a list {v!r:.40}, the record has {content!r:.40}")
            return
        if t is tuple:
            if tag != _T_TUPLE or len(code) != len(v) + 1:
                raise OutOfStep(f"step {self.index}: a tuple where the record has {code!r:.40}")
            for c, x in zip(code[1:], v):
                self._match(c, x)
            return
        if t is Tuple2 or t is TimeWindow or t is VoidNamespace:
            if type(self.decoded(code)) is not t or self.decoded(code) != v:
                raise OutOfStep(f"step {self.index}: a key {v!r:.40}, the record has {code!r:.40}")
            return
        if isinstance(v, RemoteObject):
            if code != (_T_OBJ, v._h) or v._s is not self:
                raise OutOfStep(f"step {self.index}: object {v._h} where the record has {code!r:.40}")
            return
        name = self.functions.get(id(v))
        if name is not None:
            if code != (_T_FN, name):
                raise OutOfStep(f"step {self.index}: function {name} where the record has {code!r:.40}")
            return
        if t is io.BytesIO and tag == _T_SINK:
            self.sinks.append(v)
            return
        if tag == _T_SERIALIZER and getattr(v, "serializer_id", None) == code[1]:
            return
        if callable(v) and tag == _T_CALLBACK:
            self.callbacks[code[1]] = v
            return
        raise OutOfStep(f"step {self.index}: an argument of type {t.__name__} where the record has {code!r:.40}")


class _HarnessLike(type):
    """What is asked of the class (the shrinker's ``valid_program``, ``simpler_steps``...) is
    the inner harness class's."""

    def __getattr__(cls, name: str):
        inner = cls.__dict__.get("harness_class") or type.__getattribute__(cls, "harness_class")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


class AheadHarness(metaclass=_HarnessLike):
    """A harness (of the machine's class) for a walk whose implementation runs in a process
    of its own: given the walk with :meth:`expect`, it runs ahead there and is checked here
    from the records (:class:`Replay`); out of step, it goes on live. Anything else is the
    inner harness's (``coverage``, ``steps``...). Bound to a machine by :func:`ahead_harness`."""

    # HarnessBase's declared members, this class's own (not the inner harness class's)
    runs_ahead = True
    confirmed_on_replay = True  # a failure it reports was found (or confirmed) live
    sampled = False
    harness_class: type = None
    machine: str = ""
    make = None  # builds the implementation live (the RemoteFactory with the run's arguments)

    def __init__(self, impl, **options) -> None:
        self.options = options
        self.program: list = []
        self.replay: Replay | None = None
        self.streaming = False
        self.expected = 0  # steps given to run ahead
        self.live = impl
        session = getattr(impl, "_s", None) if isinstance(impl, RemoteObject) else None
        if type(session) is Session and session.root == impl._h:
            self.replay = Replay(session.worker, session.isolation, type(impl))
            self.inner = self.harness_class(self.replay.root_proxy, **options)
        else:
            self.inner = self.harness_class(impl, **options)

    def __getattr__(self, name: str):
        return getattr(self.__dict__["inner"] if "inner" in self.__dict__ else None, name)

    @property
    def impl(self):
        """The implementation, live (what a walk's generator may ask, before :meth:`expect`)."""
        return self.live if self.replay is not None else self.inner.impl

    def expect(self, steps) -> None:
        """The walk's steps, in order: sent to run ahead."""
        if self.replay is None:
            return
        try:
            codes = [(step.op, [_plain(a) for a in step.args]) for step in steps]
        except _Unrecordable:
            self.replay = None
            self.inner = self.harness_class(self.live, **self.options)
            return
        worker = self.replay.worker
        try:
            worker.send_ahead((_BATCH, [], (_WALK, self.live._h, self.machine, dict(self.options), codes)))
        except WorkerFailure:
            self.replay = None
            self.inner = self.harness_class(self.live, **self.options)  # the live calls report its end
            return
        worker.streaming = self.streaming = True
        self.expected = len(codes)

    def apply(self, step: Step) -> None:
        index = len(self.program)
        self.program.append(step)
        if not self.streaming:
            self.inner.apply(step)
            return
        self.replay.begin(index)
        try:
            # the step's record, waited for as long as the calls it makes may take (a bulk step:
            # its count times the limit); not in time, or the process ended: the step goes live,
            # where each call is timed alone and a real hang is the step's TIMEOUT
            implementation_calls(self.harness_class.calls_in(step), self.replay.load)
        except (StepTimeout, WorkerFailure, OutOfStep):
            self._go_live(self.program[:-1])
            self.inner.apply(step)
            return
        try:
            self.inner.apply(step)
            self._end_step()
            if index + 1 == self.expected:
                self._finish()
        except OutOfStep:
            self._go_live(self.program[:-1])
            self.inner.apply(step)
        except CheckFailure as exc:
            failure = exc.failure
            if failure.kind == TIMEOUT or failure.code in (WORKER_EXIT, WORKER_PROTOCOL):
                self._stop()  # the checker saw it itself: no record is needed to believe it
                raise
            if self.replay.status == 1:  # the walk failed over there too and ended: its process is kept
                self._finish()
            self._go_live(self.program[:-1])  # confirmed live, or the walk goes on live
            self.inner.apply(step)

    def _end_step(self) -> None:
        """The step's record must be used up (read now if the harness made no call); a
        record that does not come in time, or a process that ends, is out of step here:
        the harness made no call that could have caused it."""
        try:
            implementation_call(self.replay.end)
        except (StepTimeout, WorkerFailure) as exc:
            raise OutOfStep(f"step {self.replay.index}: {exc}") from None

    def final_check(self) -> None:
        self.inner.final_check()
        self._finish()

    def _finish(self) -> None:
        """The walk is over here: read its end there (or end that process, if it goes on)."""
        if not self.streaming:
            return
        try:
            ended = implementation_call(self.replay.finish)
        except (StepTimeout, WorkerFailure):
            ended = False
        if ended:
            self.replay.worker.streaming = self.streaming = False
        else:
            self._stop()

    def close(self) -> None:
        self._stop()
        self.inner.close()

    def _stop(self) -> None:
        if self.streaming:
            self.streaming = False
            worker = self.replay.worker
            worker.streaming = False
            worker.kill()

    def _go_live(self, done: list) -> None:
        """Drop the records: the implementation built again, the steps before applied live."""
        self._stop()
        self.replay = None
        self.inner = self.harness_class(build(self.make), **self.options)
        for step in done:
            self.inner.apply(step)


def ahead_harness(harness_class: type, machine: str, make) -> type:
    """The :class:`AheadHarness` of ``machine`` (whose harness is ``harness_class``),
    building its implementation live with ``make``."""
    return type(f"Ahead[{harness_class.__name__}]", (AheadHarness,),
                {"harness_class": harness_class, "machine": machine, "make": staticmethod(make)})
