"""The child's side of an implementation in a process of its own (:mod:`cowcheck.core.remote`).

:func:`_child_main` runs in the forked child: it imports the user's module
there and serves the checker's requests (:class:`_Server`: the
implementation's objects by handle, values encoded as
:mod:`cowcheck.core.wire` says) until the pipe closes. A walk run ahead is
run by what :mod:`cowcheck.core.recorder` registers (:func:`register_ahead`).
"""

from __future__ import annotations

import builtins
import copy
import gc
import importlib
import inspect
import io
import operator
import os
import signal
import sys
import types
from typing import Callable

from cowcheck.core.boundary import no_user_here, raised_text
from cowcheck.core.errors import callables_of, did_you_mean
from cowcheck.core.wire import (_ANSWER, _BATCH, _CALL, _CALLBACK, _CALLS, _DRAIN, _ERR, _FOLLOWED, _GETATTR,
                                  _IMPORT_ERROR, _LATE, _MAX_DEPTH, _MAX_ITEMS, _NEW, _NOP, _OK, _OP, _PROTOCOL, _READY, _REPLY,
                                  _SCALARS, _SKIPPED, _SYNC, _T_CALLABLE, _T_CALLBACK, _T_ENTRIES, _T_FN, _T_LIST,
                                  _T_LISTX, _T_OBJ, _T_SAME, _T_SERIALIZER, _T_SINK, _T_TUPLE, _T_TUPLE2, _T_VOID,
                                  _T_WINDOW, _TEXT, _WALK, Isolation, _Broken, _Channel, _exception_info,
                                  _oversized)
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2
from cowcheck.reference.serializers import serializer_from_id


def _memoable(value) -> bool:
    """Whether the identity of an argument ``value`` must be carried (CPython shares the others)."""
    t = type(value)
    if t is int:
        return not -5 <= value <= 256
    if t is str:
        return len(value) > 1 or (len(value) == 1 and ord(value) > 255)
    return t is Tuple2 or t is TimeWindow


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
        self.made_with: tuple | None = None  # the arguments of the last implementation built (a search builds more)
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
        if op in _APART:
            if self.made_with is None:
                raise _Broken("no implementation was built to run programs apart")
            return _Encoded(_APART[op](self, *request[1:]))
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
            args, kwargs = [self.dec_arg(a) for a in args], {k: self.dec_arg(v) for k, v in kwargs.items()}
            self.made_with = (args, kwargs)
            value = self.factory(*args, **kwargs)
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
                if len(v) > _MAX_ITEMS:
                    return _oversized(v)
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
                if len(v) > _MAX_ITEMS:
                    return _oversized(v)
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
            if type(v) is not list or len(v) > _MAX_ITEMS:
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


_AHEAD: Callable | None = None  # runs a walk ahead in the child (cowcheck.core.recorder registers it)


def register_ahead(run: Callable) -> None:
    """``run(server, root handle, machine, harness options, steps)``: how the child runs a walk ahead."""
    global _AHEAD
    _AHEAD = run


_APART: dict = {}  # request -> how the child runs it (cowcheck.core.apart registers them)


def register_apart(request: int, run: Callable) -> None:
    """``run(server, *request[1:]) -> codes``: how the child runs ``request``, a request on programs
    of its own, built with the arguments of the implementation built last (``made_with``)."""
    _APART[request] = run


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
