"""Walks and Hypothesis's examples run ahead in the implementation's process, checked step by step here.

Asking an implementation in another process call by call costs a round trip
per call (:mod:`cowcheck.core.remote`), and on a loaded machine each one
waits for both processes to be scheduled. So a walk's program is sent to the
implementation's process at once (a Hypothesis example's steps one by one, as
Hypothesis draws them), and there the very harness of the checker runs it
over the implementation, through proxies of the same classes as the
checker's, each call made at once (in-process semantics) and recorded
(:class:`~cowcheck.core.recorder.Recorder`): what was called with what, what it returned or raised,
what the harness's own functions were given (``transform``). The records
stream back a few steps at a time while the next steps run.

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
end, the checker saw itself). So a walk costs one request, an example one
message per step and no wait, and both run on two cores; the verdict is the
one a live walk gives. While it runs steps ahead, the implementation's
process is scheduled as a batch process (woken by the checker's message, it
does not take the core from the checker, who goes on meanwhile); answering
calls one by one, as any process (the checker waits for each answer).

Each step's record is read under the step time limit (a walk's inside that
step, an example's at a later step or at the example's end), a bulk step's
for a few of its calls' limits (``_CALLS_WAITED``) before it goes live, where
each call is timed alone: a hang or a crash of the implementation shows at
the step that caused it, within a few limits.
"""

from __future__ import annotations

import io
from collections import deque

from cowcheck.core.apart import shrink_apart
from cowcheck.core.boundary import WORKER_EXIT, WORKER_PROTOCOL, OutOfStep, WorkerFailure, build
from cowcheck.core.failures import TIMEOUT, CheckFailure
from cowcheck.core.limits import StepTimeout, implementation_call, implementation_calls
from cowcheck.core.processes import describe_wait_status
from cowcheck.core.program import Step
from cowcheck.core.recorder import _ROOT, _plain, _Unrecordable
from cowcheck.core.remote import RemoteFactory
from cowcheck.core.session import RemoteObject, Session, _Bound
from cowcheck.core.wire import (_ANSWER, _BATCH, _END, _MORE, _SCALARS, _STEP, _T_CALLABLE, _T_CALLBACK, _T_FN,
                                  _T_LIST, _T_LISTX, _T_OBJ, _T_SERIALIZER, _T_SINK, _T_TUPLE, _T_TUPLE2, _T_VOID,
                                  _T_WINDOW, _WALK, _Broken)
from cowcheck.reference.keys import TimeWindow, Tuple2, VoidNamespace

__all__ = ["AheadHarness", "Replay", "ahead_harness", "example_harness"]

# Steps a stepwise harness lets run ahead unchecked before it waits for their records (it checks
# each one whose record is there as soon as it is): a bound on what a hang over there lets run on.
_MOST_UNCHECKED = 64
# A step's record is waited for as long as this many of its calls may take, at most: a bulk step
# that hangs over there goes live (where its first call that hangs is timed alone) within a few
# limits, not its count of them; a bulk step that was only slow runs again live.
_CALLS_WAITED = 4


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

    def ready(self) -> bool:
        """Whether the next record (or the process's end) is here, to be read without waiting."""
        channel = self.worker.channel
        if channel is None:
            return True
        try:
            return channel.waiting()
        except OSError:
            return True

    def end(self) -> None:
        """After the harness applied the step: its record must be used up."""
        if not self.loaded:
            self._load()
        if self.records:
            raise OutOfStep(f"step {self.index}: the harness made fewer calls than the walk recorded")

    def finish(self, stepwise: bool = False) -> None:
        """After the last step: the walk ends there (a stepwise walk is told to). Its answer
        (after the records not read) is not waited for: it is read before the worker's next
        request (:meth:`~cowcheck.core.remote.Worker.collect`)."""
        if self.ended:
            return
        if stepwise:
            self.worker.send_ahead((_END,))
        self.worker.owed += 1
        self.ended = True

    def _receive(self):
        worker = self.worker
        if worker.channel is None:
            self.closed = WorkerFailure("its process had ended")
            raise self.closed
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
        if type(entry) is not list or not (len(entry) == 6 or len(entry) == 8) or entry[1] != handle \
                or entry[2] != name or entry[0] != kind or type(entry[4]) is not bool:
            raise OutOfStep(f"step {self.index}: the harness asked {kind} {name!r:.40}, the record has "
                            f"{entry!r:.80}")
        return entry

    # ------------------------------------------------- the session's interface

    def call(self, handle, name, args, kwargs):
        entry = self._next("c", handle, name)
        codes = entry[3]
        if kwargs or type(codes) is not list or len(codes) != len(args):
            self._match_arguments(entry, args, kwargs or {})
        else:
            for code, value in zip(codes, args):
                if type(code) is not type(value) or type(value) not in _SCALARS or code != value:
                    self._match(code, value)
        if len(entry) == 8:
            return self._outcome(entry)
        code = entry[5]
        if entry[4]:
            return code if type(code) in _SCALARS else self.decoded(code)
        raise self.error(code)

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
        ok, code = entry[4], entry[5]
        if ok and type(code) is tuple and code == (_T_CALLABLE,):
            return _Bound(self, handle, name)
        return self._value(ok, code)

    def drain(self, handle, n: int):
        entry = self._next("d", handle, n)
        ok, code = entry[4], entry[5]
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

    def _value(self, ok: bool, code):
        if ok:
            return self.decoded(code)
        raise self.error(code)

    def _outcome(self, entry: list):
        raised = None
        if len(entry) == 8:
            invocations, written = entry[6], entry[7]
            if type(invocations) is not list or type(written) is not tuple:
                raise OutOfStep(f"step {self.index}: a call's invocations {invocations!r:.40}, writes "
                                f"{written!r:.40}")
            for invocation in invocations:
                raised = self._invoke(invocation)
            for sink, data in zip(self.sinks, written):
                if type(data) is bytes:
                    sink.write(data)
        self.sinks, self.callbacks = [], {}
        ok, code = entry[4], entry[5]
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
        codes, kw_codes = (recorded, {}) if type(recorded) is list else recorded if (
            type(recorded) is tuple and len(recorded) == 2 and type(recorded[0]) is list
            and type(recorded[1]) is dict) else (None, None)
        if codes is None or len(codes) != len(args) or set(kw_codes) != set(kwargs):
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
        if t is Tuple2 or t is TimeWindow:
            if tag != (_T_TUPLE2 if t is Tuple2 else _T_WINDOW) or len(code) != 3:
                raise OutOfStep(f"step {self.index}: a key {v!r:.40}, the record has {code!r:.40}")
            self._match(code[1], v.f0 if t is Tuple2 else v.start)
            self._match(code[2], v.f1 if t is Tuple2 else v.end)
            return
        if t is VoidNamespace:
            if code != (_T_VOID,):
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
    """A harness (of the machine's class) for a program whose implementation runs in a process
    of its own: it runs ahead there and is checked here from the records (:class:`Replay`);
    out of step, it goes on live. Anything else is the inner harness's (``coverage``,
    ``steps``...). Bound to a machine by :func:`ahead_harness`.

    A walk gives its steps at once (:meth:`expect`), each checked as it is applied. A
    *stepwise* harness (a Hypothesis example, whose next step is drawn only once the last
    returned) sends each step as it is given and checks it once its record is here (at a
    later step, or at :meth:`settle`, :meth:`final_check`; it waits for records only when
    ``_MOST_UNCHECKED`` steps are unchecked): while Hypothesis draws the next steps here,
    the implementation's process runs the last ones, and no step waits for an answer. A
    failure is so raised a few steps late, with the failing step's index, and the
    harness's ``steps`` end at the failing step."""

    # HarnessBase's declared members, this class's own (not the inner harness class's)
    runs_ahead = True
    confirmed_on_replay = True  # a failure it reports was found (or confirmed) live
    sampled = False
    harness_class: type = None
    live_harness: type = None  # (the inner harness class, set with it)
    machine: str = ""
    make = None  # builds the implementation live (the RemoteFactory with the run's arguments)
    stepwise = False
    # A failure found on the records is replayed live before it is raised (False: raised as the records
    # show it, for programs settled apart, whose stored failure is replayed live once: cowcheck.core.apart).
    confirms_live = True
    trusting: type = None  # this class with confirms_live False (set with harness_class)
    shrink_apart = classmethod(shrink_apart)

    def __init__(self, impl, **options) -> None:
        self.options = options
        self.program: list = []
        self.replay: Replay | None = None
        self.streaming = False
        self.expected = 0  # steps given to run ahead (a walk)
        self.unchecked: deque = deque()  # indices of the steps sent and not checked yet (stepwise)
        self.live = impl
        session = getattr(impl, "_s", None) if isinstance(impl, RemoteObject) else None
        if type(session) is Session and session.root == impl._h:
            self.replay = Replay(session.worker, session.isolation, type(impl))
            self.inner = self.harness_class(self.replay.root_proxy, **options)
        else:
            self.inner = self.harness_class(impl, **options)

    @classmethod
    def following(cls, worker, isolation, root_class: type, steps: list, **options) -> "AheadHarness":
        """A harness checking ``steps`` from the records of a walk already asked for (one of the
        programs of a request that runs several, each on an implementation of its own:
        :mod:`cowcheck.core.apart`); ``root_class``: the proxy class of such an implementation."""
        self = cls.__new__(cls)
        self.options, self.program, self.unchecked, self.live = options, [], deque(), None
        self.replay = Replay(worker, isolation, root_class)
        self.inner = self.harness_class(self.replay.root_proxy, **options)
        worker.streaming = self.streaming = True
        self.expected = len(steps)
        return self

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
        if self.stepwise and self.replay is not None:
            self._send(index)
            # the steps whose records are here are checked; the others wait, unless too many do
            while self.unchecked and (len(self.unchecked) > _MOST_UNCHECKED or self.replay.ready()):
                self._check(self.unchecked.popleft())
        elif self.streaming:
            self._check(index)
        else:
            self.inner.apply(step)

    def settle(self) -> None:
        """Check the steps given and not checked yet (a stepwise harness's)."""
        while self.unchecked:
            self._check(self.unchecked.popleft())

    def _send(self, index: int) -> None:
        """Stepwise: send step ``index`` (the first one starts the walk there). A step that
        cannot be sent, and every later one, goes live."""
        step = self.program[index]
        worker = self.replay.worker
        try:
            code = (step.op, [_plain(a) for a in step.args])
            if self.streaming:
                worker.send_ahead((_MORE, [code]))
            elif index == 0:
                worker.send_ahead((_BATCH, [], (_WALK, self.live._h, self.machine, dict(self.options), [code], True)))
                worker.streaming = self.streaming = True
            else:  # the walk there was ended
                raise OutOfStep(f"step {index} after the walk ended")
        except (_Unrecordable, WorkerFailure, OutOfStep):
            self.settle()
            if self.replay is not None:
                self._go_live(self.program[:index])
            self.inner.apply(step)
            return
        self.unchecked.append(index)

    def _check(self, index: int) -> None:
        """Check step ``index`` from its record. Out of step (or its record not in time, or
        the process ended), or failing, the step goes live: the implementation is built
        again, the steps before it applied live, then it and any sent after it."""
        step = self.program[index]
        self.replay.begin(index)
        try:
            # the step's record, waited for as long as a few of the calls it makes may take (a
            # bulk step: up to _CALLS_WAITED times the limit); not in time, or the process ended:
            # the step goes live, where each call is timed alone and a real hang is the step's TIMEOUT
            implementation_calls(min(self.harness_class.calls_in(step), _CALLS_WAITED), self.replay.load)
        except (StepTimeout, WorkerFailure, OutOfStep):
            self._live_from(index)
            return
        try:
            self.inner.apply(step)
            self._end_step()
            if index + 1 == self.expected:
                self._finish()
        except OutOfStep:
            self._live_from(index)
        except CheckFailure as exc:
            failure = exc.failure
            if failure.kind == TIMEOUT or failure.code in (WORKER_EXIT, WORKER_PROTOCOL):
                self.unchecked.clear()
                self._stop()  # the checker saw it itself: no record is needed to believe it
                raise
            if self.replay.status == 1:  # the walk failed over there too and ended: its process is kept
                self._finish()
            if not self.confirms_live:  # (a walk going on over there: the rest of its records are dropped
                self.unchecked.clear()  # before the next request; its process is kept)
                self._finish()
                raise
            self._live_from(index)  # confirmed live, or the walk goes on live

    def _live_from(self, index: int) -> None:
        later = [self.program[i] for i in self.unchecked]
        self.unchecked.clear()
        self._go_live(self.program[:index])
        self.inner.apply(self.program[index])
        for step in later:
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
        self.settle()
        self.inner.final_check()
        self._finish()

    def _finish(self) -> None:
        """The walk is over here: it ends there too (or that process is ended)."""
        if not self.streaming:
            return
        try:
            self.replay.finish(self.stepwise)
        except WorkerFailure:
            self._stop()
            return
        self.replay.worker.streaming = self.streaming = False

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


def ahead_harness(harness_class: type, machine: str, make, stepwise: bool = False) -> type:
    """The :class:`AheadHarness` of ``machine`` (whose harness is ``harness_class``),
    building its implementation live with ``make``."""
    cls = type(f"Ahead[{harness_class.__name__}]", (AheadHarness,),
               {"harness_class": harness_class, "live_harness": harness_class, "machine": machine,
                "make": staticmethod(make), "stepwise": stepwise})
    # spares need no live confirmation of their own: settling confirms what it keeps of them
    cls.trusting = cls.spare_harness = type(f"AheadTrusting[{harness_class.__name__}]", (cls,), {
        "confirms_live": False, "confirmed_on_replay": False, "shrink_apart": None})
    return cls


def example_harness(harness_class: type, machine: str, factory, make) -> type:
    """The harness class a Hypothesis machine of ``machine`` applies its examples through:
    ``harness_class``, or for a factory of implementations in a process of their own
    (a :class:`~cowcheck.core.remote.RemoteFactory`) its stepwise :class:`AheadHarness`,
    building the implementation live with ``make``."""
    if not isinstance(factory, RemoteFactory):
        return harness_class
    return ahead_harness(harness_class, machine, make, stepwise=True)
