"""A walk run ahead, on the implementation's side: its process runs the checker's harness and records every call.

:func:`run_ahead` (registered with :mod:`cowcheck.core.child`, which runs it
for a walk's request) runs a walk's steps through the machine's harness over
the implementation, through a :class:`Recorder` (the child's server, each
call made at once and recorded), and streams the records back a few steps at
a time. The checker's side, which checks the steps from those records, is
:mod:`cowcheck.core.ahead`; how a step's arguments travel as plain data
(:func:`_plain`, :func:`_unplain`) is shared by both.
"""

from __future__ import annotations

import io
import os
import time

from cowcheck.core.child import _OPS, _next_items, _Server, register_ahead
from cowcheck.core.failures import CheckFailure
from cowcheck.core.machine import machine_kind
from cowcheck.core.program import Step
from cowcheck.core.session import RemoteObject, _Bound, _proxy_class
from cowcheck.core.wire import (_END, _MORE, _SCALARS, _STEP, _T_CALLABLE, _T_CALLBACK, _T_FN, _T_OBJ, _T_SERIALIZER,
                                  _T_SINK, _T_TUPLE, _T_TUPLE2, _T_VOID, _T_WINDOW, _MAX_ITEMS, Oversized, _Broken,
                                  _exception_info, _oversized)
from cowcheck.reference.keys import TimeWindow, Tuple2, VoidNamespace

_ROOT = 1  # the implementation's handle in a walk's records
# A walk's records are sent a few at a time (at most this many, or after this many seconds, and
# when its steps are done): a checker waiting for them wakes once for several steps.
_RECORDS_AT_ONCE = 16
_RECORDS_WAIT = 0.002
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
        from cowcheck.reference.keys import VOID_NAMESPACE
        return VOID_NAMESPACE
    raise _Broken(f"a step argument tagged {tag!r:.20}")



# ------------------------------------------------------------------ the implementation's side


class Recorder(_Server):
    """The session of a walk run ahead in the implementation's process: the proxies the
    harness holds are the checker's classes, each call is made on the real object at once
    and appended to :attr:`entries` as ``[kind, handle, name, arguments, ok, code]``, or
    ``[kind, handle, name, arguments, ok, code, invocations, written]`` for a call given
    functions or output streams: kind ``c`` a method call, ``o`` an operation (``len``,
    ``iter``, ``eq``...), ``a`` an attribute read, ``d`` ``n`` items of an iterator
    (``take``); ``arguments``: the positional arguments' codes, or ``(those, keyword
    arguments' codes)``; ``ok``: whether it returned (``code``: what) or raised
    (``code``: the exception's description); ``invocations``: what the harness's own
    functions were given and returned during the call; ``written``: the bytes a call
    wrote to output streams."""

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

    @property
    def watch(self) -> list:
        """Where :func:`~cowcheck.core.remote.changed_in_place` notes a list the harness changed in
        place: here the implementation holds that very list, there is nothing to send it."""
        return []

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
        if (t is list or t is tuple) and len(value) > _MAX_ITEMS:
            return Oversized(*_oversized(value)[1:])  # as the checker reads it (and without reading it through)
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
        entry = ["c", handle, name, None, True, None]
        if kwargs:
            args, kwargs = self._arguments(args, kwargs, entry)
        else:
            args = self._positional(args, entry)
        self.entries.append(entry)
        try:
            value = getattr(target, name)(*args, **kwargs) if kwargs else getattr(target, name)(*args)
        except BaseException as exc:
            self._raised(entry, exc)
            raise
        return self._returned(entry, value)

    defer = call

    def followed(self, handle, name, then, args, kwargs):
        return self.call(handle, name, args, kwargs)  # recorded, and replayed, call by call

    def op(self, handle, name, *args, **kwargs):
        target = self.obj(handle)
        entry = ["o", handle, name, None, True, None]
        if kwargs:
            args, kwargs = self._arguments(args, kwargs, entry)
        else:
            args = self._positional(args, entry)
        self.entries.append(entry)
        try:
            value = _OPS[name](target, *args, **kwargs)
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
        entry = ["a", handle, name, [], True, None]
        self.entries.append(entry)
        try:
            value = getattr(target, name)
        except BaseException as exc:
            entry[4], entry[5] = False, _exception_info(exc)
            raise
        if callable(value):
            entry[5] = (_T_CALLABLE,)
            return _Bound(self, handle, name)
        entry[5] = self.enc(value)
        return self.wrap(value)

    def drain(self, handle, n: int):
        iterator = self.obj(handle)
        entry = ["d", handle, n, [], True, None]
        self.entries.append(entry)
        items, error = _next_items(iterator, n)
        entry[5] = (self.enc_items(items, 0), _exception_info(error) if error is not None else None)
        return self.wrap_all(items), error

    def prefetch(self, handle, name, calls) -> None:
        pass  # the calls are recorded as they are made

    # ------------------------------------------------- recording

    def _positional(self, args: tuple, entry: list) -> tuple:
        """The arguments the implementation is given (the record's codes in ``entry``)."""
        codes = []
        for v in args:
            t = type(v)
            if t in _SCALARS:
                codes.append(v)
            elif t is list or t is Tuple2 or t is TimeWindow or t is VoidNamespace:
                codes.append(self.enc(v))
            else:
                return self._arguments(args, None, entry)[0]
        entry[3] = codes
        return args

    def _arguments(self, args, kwargs, entry: list):
        """``(args, kwargs)`` the implementation is given (the record's codes in ``entry``)."""
        real, codes = [], []
        context = _Context()
        for v in args:
            r, c = self._translate(v, context)
            real.append(r)
            codes.append(c)
        kw_real, kw_codes = {}, {}
        for key, v in (kwargs or {}).items():
            kw_real[key], kw_codes[key] = self._translate(v, context)
        entry[3] = (codes, kw_codes) if kw_codes else codes
        if context.invocations or context.sinks or context.functions:
            entry += [context.invocations, context.sinks]
        return real, kw_real

    def _raised(self, entry: list, exc: BaseException) -> None:
        entry[4], entry[5] = False, _exception_info(exc)
        if len(entry) == 8:
            entry[7] = tuple(stream.getvalue() for stream in entry[7])

    def _returned(self, entry: list, value):
        t = type(value)
        entry[5] = value if t in _SCALARS else self.enc(value)
        if len(entry) == 8:
            entry[7] = tuple(stream.getvalue() for stream in entry[7])
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
        serializer_id = getattr(v, "serializer_id", None) if t.__module__ == "cowcheck.reference.serializers" else None
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

    def __init__(self) -> None:
        self.invocations, self.sinks, self.functions = [], [], 0


def run_ahead(server: _Server, root_handle: int, machine: str, options: dict, steps: list,
              more: bool = False) -> None:
    """In the implementation's process: run ``steps`` through ``machine``'s harness over the
    program's implementation, sending each step's record (``(STEP, index, entries,
    status)``: status 0 passed, 1 the harness failed, 2 it stopped) as soon as it is made.
    With ``more``, the walk goes on with the steps of each ``(MORE, steps)`` message until
    ``(END,)``; a step given after the harness failed or stopped gets an empty record
    with that status at once."""
    _scheduled_as_batch(True)
    try:
        _run_ahead(server, root_handle, machine, options, steps, more)
    finally:
        _scheduled_as_batch(False)


def _run_ahead(server: _Server, root_handle: int, machine: str, options: dict, steps: list, more: bool) -> None:
    recorder = Recorder(server)
    status = 0
    try:
        harness = machine_kind(machine).harness_class(recorder.wrap_root(server.obj(root_handle)), **options)
    except BaseException:
        status = 2
    index = 0
    records: list = []  # made and not sent yet
    send_by = 0.0
    while True:
        for code in steps:
            if status and not more:
                break
            if not status:
                try:
                    step = Step(code[0], tuple(_unplain(a) for a in code[1]))
                    harness.apply(step)
                except CheckFailure:
                    status = 1
                except BaseException:
                    status = 2
            entries, recorder.entries = recorder.entries, []
            records.append((_STEP, index, entries, status))
            index += 1
            now = time.perf_counter()
            if len(records) == 1:
                send_by = now + _RECORDS_WAIT
            elif len(records) >= _RECORDS_AT_ONCE or now >= send_by:
                server.channel.send_all(records)
                records = []
        if records:
            server.channel.send_all(records)
            records = []
        if not more:
            return
        message = server.channel.receive()
        if type(message) is tuple and len(message) == 2 and message[0] == _MORE and type(message[1]) is list:
            steps = message[1]
        elif message == (_END,):
            return
        else:
            raise _Broken(f"a message {message!r:.60} during a walk")


def _scheduled_as_batch(batch: bool) -> None:
    """In the implementation's process, while it runs steps ahead: woken by a message, it does
    not take the core from the checker that sent it (who goes on meanwhile, not waiting for
    an answer); its share of the machine is unchanged. Answering calls one by one it is
    scheduled as any process (the checker waits for each answer). Linux; elsewhere nothing."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH if batch else os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass


register_ahead(run_ahead)
