"""The pipe between the checker and an implementation in a process of its own (:mod:`cowcheck.core.remote`).

Message kinds, requests, answers and value tags; :class:`Isolation`, what
both sides know of the implementation's API; the channel (length-prefixed
:mod:`marshal` messages over two pipes: plain values only, never code); how
an exception crosses (:func:`_exception_info`). The checker's side is
:mod:`cowcheck.core.session`, the child's :mod:`cowcheck.core.child`.
"""

from __future__ import annotations

import builtins
import copy
import marshal
import os
import select
import time

import attrs

from cowcheck.core.failures import long_container, short_beginning

# Messages.
_READY, _IMPORT_ERROR, _BATCH, _ANSWER, _CALLBACK, _REPLY, _STEP, _MORE, _END = range(9)
# Requests.
_NEW, _CALL, _OP, _GETATTR, _DRAIN, _CALLS, _SYNC, _NOP, _WALK, _FOLLOWED, _SEARCH, _WALKS = range(12)
# Answers.
_OK, _ERR, _LATE, _SKIPPED, _PROTOCOL = range(5)
# Value tags: a tagged value is a tuple whose first element is one of these.
_T_TUPLE, _T_LIST, _T_LISTX, _T_OBJ, _T_TUPLE2, _T_WINDOW, _T_VOID, _T_SAME, _T_FN, _T_CALLBACK, _T_SINK, \
    _T_SERIALIZER, _T_CALLABLE, _T_ENTRIES, _T_OVERSIZED = range(15)

_SCALARS = frozenset({int, str, float, bytes, bool, type(None)})
_MAX_DEPTH = 32  # containers nest no deeper across the boundary (deeper: a handle)
# Items of one list or tuple the implementation hands back that cross as they are: a longer one
# crosses as its length and beginning (Oversized), and the map's process neither copies nor
# marshals it. The longest a correct map hands back is a listing of its entries (100,000 in the
# largest size class) or a state (as long as the appends a program makes).
_MAX_ITEMS = 1_000_000
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


class Oversized:
    """What the checker reads for a list or tuple of more than ``_MAX_ITEMS`` items the
    implementation handed back: its type, length and beginning. It equals nothing but itself,
    so comparing it with what the model expects is the divergence it is (a correct map never
    hands back anything as large), and it shows as :func:`~cowcheck.core.failures.safe_repr`
    shows the whole value in one process."""

    __slots__ = ("type_name", "length", "text")

    def __init__(self, type_name: str, length: int, beginning: str) -> None:
        self.type_name, self.length = type_name, length
        self.text = long_container(type_name, length, beginning)

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other

    __hash__ = object.__hash__

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return self.text

    def __copy__(self) -> "Oversized":
        return self  # it changes no more than a string does

    def __deepcopy__(self, memo) -> "Oversized":
        return self

    def __getattr__(self, name: str):
        # A function of the checker's handed one (transform's, by a map that passes it a state this long).
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self.text} reached cowcheck as its length and beginning only (a {self.type_name} "
                             f"of over {_MAX_ITEMS:,} items does not cross between the processes whole): it has "
                             f"no {name!r} here")


def _oversized(value) -> tuple:
    """The code of a list or tuple too long to cross: its type, length and the beginning of its
    plain items (if an item is of another type, the beginning is ``[...]``: no code of the
    implementation's runs to describe it)."""
    head = value[:7]
    plain = all(type(x) in _SCALARS for x in head)
    text = short_beginning(head) if plain else ("[...]" if type(value) is list else "(...)")
    return (_T_OVERSIZED, type(value).__name__, len(value), text)


class _Broken(Exception):
    """The other side sent what the protocol does not allow."""


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
