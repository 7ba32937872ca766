"""The checker's side of a program run in the implementation's process (:mod:`cowcheck.core.remote`).

:class:`Session` holds every object of one program on both sides (handles,
twins, proxies, the keys' identities) and speaks the protocol of
:mod:`cowcheck.core.wire` through its :class:`~cowcheck.core.remote.Worker`;
:class:`RemoteObject` and the classes made from it per type of object there
are the proxies the harness calls.
"""

from __future__ import annotations

import builtins
import io
import time
from collections import deque

from cowcheck.core.boundary import WORKER_PROTOCOL, ImplementationError, LateError, WorkerFailure
from cowcheck.core.errors import InternalError
from cowcheck.core.wire import (_BATCH, _CALL, _CALLS, _CHUNK_MOST, _CHUNK_SECONDS, _DRAIN, _ERR, _FLUSH_AT,
                                  _FOLLOWED, _GETATTR, _MAX_DEPTH, _NEW, _NOP, _OK, _OP, _PROTOCOL, _REPLY, _SCALARS,
                                  _SYNC, _T_CALLABLE, _T_CALLBACK, _T_ENTRIES, _T_FN, _T_LIST, _T_LISTX, _T_OBJ,
                                  _T_SAME, _T_SERIALIZER, _T_SINK, _T_TUPLE, _T_TUPLE2, _T_VOID, _T_WINDOW, Isolation,
                                  _T_OVERSIZED, Oversized, _Broken, _exception_info)
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2, VoidNamespace

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


# ------------------------------------------------------------------ session


class Session:
    """One program: the implementation the factory built in the child, and every object
    of the program on both sides (handles, twins, proxies, the keys' identities)."""

    def __init__(self, worker, isolation: Isolation) -> None:
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
        serializer_id = getattr(v, "serializer_id", None) if t.__module__ == "cowcheck.reference.serializers" else None
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
        if tag == _T_OVERSIZED:
            if (len(c) != 4 or c[1] not in ("list", "tuple") or type(c[2]) is not int or type(c[3]) is not str
                    or len(c[3]) > 1000):
                raise _Broken("an oversized value without its type, length and beginning")
            return Oversized(c[1], c[2], c[3])
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
