"""Flink's own AsyncExecutionController (1.20.0 to 2.3.0) behind the reference's API: ``--machine async --impl flink``.

The async harness drives a controller through ``process_record``, ``process_timer``,
``value_state(name).async_value()/async_update()/async_clear()`` and the
futures' ``then_*`` methods, ``run_mailbox``, ``trigger_if_needed``,
``drain_inflight_records`` and ``process_non_record``. :class:`FlinkAsyncController`
answers them with Flink's controller of the release this process runs, in one
of three API generations, told apart by the classes and methods the Flink of this
process has (:func:`api_from`; each fact read with ``javap`` from the releases' jars):

- 1.20.x (experimental there): ``AsyncExecutionController(mailbox, handler,
  StateExecutor, maxParallelism, batchSize, bufferTimeout, maxInFlight)``;
  ``processNonRecord`` takes one action (no final action), epochs are serial
  only, ``syncPointRequestWithCallback(callback)`` has no overdraft (a timer
  waits for capacity as a record does), ``triggerIfNeeded`` returns nothing,
  no ``getCurrentContext`` (the field is read);
- 2.0.x: the same classes, plus final actions, overdraft and a declaration
  manager and metric group in the constructor; epochs serial only;
- 2.1 on: ``StateExecutionController`` (a subclass of ``AsyncExecutionController``)
  with ``AsyncExecutor``/``AsyncFutureImpl`` names, and the epoch mode as a
  constructor argument.

:func:`api_from` says which; ``cowcheck.flink`` gives the async machine a release's
``final_actions`` and ``overdraft`` and refuses ``--epoch-mode parallel`` where epochs are
serial only. The controller is built around parts that make it deterministic, all
implemented here in Python through JPype:

- the mailbox (``MailboxExecutor``): a queue the task thread (the harness)
  runs, mail by mail, when a step says so or when Flink drains;
- the state executor (``StateExecutor``): runs a batch at once on the calling
  thread against the harness's heap backend, so the final state is compared
  with the model's as on the reference;
- the states (``State``): named handles, one per value state.

Callbacks are Python functions Flink calls through its functional interfaces.
Nothing the suite does may change what Flink does (a failure no replay
reproduces is cowcheck's, docs/contract.md): the step time limit never unwinds
Flink's frames (``limits.held_back``: its StepTimeout waits for the call to
return, where it once landed in Python code Flink runs inside a
``CompletableFuture`` stage, which kept it: a callback's mail was never posted,
its record stayed in flight and a later drain stalled, under load only); an
exception of cowcheck's raised in a callback is raised again once the call
returns, even if Flink lost it; and Flink's exception handler keeps what it is
handed, as Flink's operator does (``Environment.failExternally``: the task
fails), to be raised when the call returns.
A drain that cannot make progress never returns in Flink (``drainInflightRecords``
loops); the mailbox notices it (1,000 polls without a state batch running in
between) and raises, which the adapter reports as the reference's
``DrainStalledError``. The buffer timeout runs on a wall-clock
timer thread in Flink, so the bridge builds the controller without one
(``buffer_timeout=0``; the async machine checks A8 only with a timeout).
Black-box: the harness sees no key accounting or request buffer.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

import attrs

from cowcheck.core.boundary import is_ours
from cowcheck.core.errors import UsageError
from cowcheck.core.limits import held_back
from cowcheck.flink.jvm import jvm
from cowcheck.reference.async_execution import DrainStalledError
from cowcheck.reference.epochs import ParallelMode
from cowcheck.reference.errors import IllegalStateError
from cowcheck.reference.state_executor import VOID_NAMESPACE, HeapStateBackend

__all__ = ["FlinkAsyncController", "FlinkDrainStalled", "AsyncApi", "api_from"]

_SPIN_LIMIT = 1_000
_PACKAGE = "org.apache.flink.runtime.asyncprocessing"


class _Stalled(Exception):
    pass


class FlinkDrainStalled(DrainStalledError):
    """Flink's drain polled the mailbox 1,000 times without a state batch running: it cannot make
    progress (Flink itself would wait forever; the reference raises DrainStalledError)."""

    def __init__(self, in_flight: int) -> None:
        IllegalStateError.__init__(self, f"Flink's drainInflightRecords cannot make progress: {in_flight} records "
                                         f"in flight, no mail and no state request to run in {_SPIN_LIMIT:,} polls "
                                         f"of the mailbox (Flink waits forever)")
        self.in_flight = in_flight


@attrs.frozen
class AsyncApi:
    """The controller's API as a Flink's classes have it (:func:`api_from`). ``controller``,
    ``handler``, ``container``: the classes; ``create_container``: the executor's factory
    method; ``buffer_field``: the controller's request buffer; what the machine may use:
    ``final_actions`` (processNonRecord's second action), ``parallel_epochs`` (the mode as a
    constructor argument), ``overdraft`` (syncPointRequestWithCallback's second argument);
    ``declarations``: a DeclarationManager and a metric group in the constructor (and states that
    are ``InternalPartitionedState``s); ``executes_sync``: the state executor also runs single
    requests (``executeRequestSync``, ``fullyLoaded``); ``context_getter``: ``getCurrentContext()``
    (else the field is read)."""

    controller: str
    handler: str
    container: str
    create_container: str
    buffer_field: str
    final_actions: bool
    parallel_epochs: bool
    overdraft: bool
    declarations: bool
    executes_sync: bool = True
    context_getter: bool = True

    @property
    def generation(self) -> str:
        """The generation in words: the releases whose classes look like these."""
        return "2.1+" if self.parallel_epochs else "2.0" if self.declarations else "1.20"

    def lacks(self) -> list[str]:
        """What the async machine leaves out on this generation, in words."""
        return ([] if self.final_actions else ["final actions (processNonRecord takes one action)"]) + \
            ([] if self.overdraft else ["timers' overdraft (a timer at the in-flight limit waits for capacity)"]) + \
            ([] if self.parallel_epochs else ["parallel epochs (serial only)"])


_HANDLERS = ("org.apache.flink.core.asyncprocessing.AsyncFutureImpl$AsyncFrameworkExceptionHandler",
             "org.apache.flink.core.state.StateFutureImpl$AsyncFrameworkExceptionHandler")


def api_from(index) -> AsyncApi | None:
    """The controller's API read from a Flink's classes (a :class:`~cowcheck.flink.jars.ClassIndex`),
    or None where there is no ``AsyncExecutionController`` (before 1.20.0): the controller class
    (``StateExecutionController`` from 2.1.0 on), the exception handler and request container that
    exist, and what the methods take — ``processNonRecord``'s actions, ``syncPointRequestWithCallback``'s
    overdraft flag, an epoch mode among the constructor's parameters."""
    if not index.has(f"{_PACKAGE}.AsyncExecutionController"):
        return None
    controller = f"{_PACKAGE}.StateExecutionController"
    if not index.has(controller):
        controller = f"{_PACKAGE}.AsyncExecutionController"
    container = f"{_PACKAGE}.AsyncRequestContainer"
    if not index.has(container):
        container = f"{_PACKAGE}.StateRequestContainer"
    executor = f"{_PACKAGE}.StateExecutor"
    parameters = [m.parameters for m in index.methods(controller, "<init>")]
    mode = f"L{_PACKAGE.replace('.', '/')}/EpochManager$ParallelMode;"
    return AsyncApi(
        controller=controller,
        handler=next((h for h in _HANDLERS if index.has(h)), _HANDLERS[-1]),
        container=container,
        create_container=("createRequestContainer" if index.methods(executor, "createRequestContainer")
                          else "createStateRequestContainer"),
        buffer_field="asyncRequestsBuffer" if index.has_field(controller, "asyncRequestsBuffer") else "stateRequestsBuffer",
        final_actions=any(len(m.parameters) == 2 for m in index.methods(controller, "processNonRecord")),
        parallel_epochs=any(mode in p for p in parameters),
        overdraft=any(len(m.parameters) == 2 for m in index.methods(controller, "syncPointRequestWithCallback")),
        declarations=index.has(f"{_PACKAGE}.declare.DeclarationManager"),
        executes_sync=bool(index.methods(executor, "executeRequestSync")),
        context_getter=bool(index.methods(controller, "getCurrentContext")))


_CLASSES: dict = {}


def _classes():
    """The JPype classes and our interface implementations (made once the JVM runs)."""
    if _CLASSES:
        return _CLASSES
    jvm()
    import jpype

    from cowcheck.flink.jars import class_index
    from cowcheck.flink.jvm import flink_jars
    from cowcheck.flink.releases import selected_build

    JClass = jpype.JClass
    build = selected_build()
    api = api_from(class_index(build.user + flink_jars(build)[0]))

    class Mailbox:
        def __init__(self) -> None:
            self.mails: deque = deque()
            self.spins = 0
            self.stalled = False  # set when a spin was detected (Flink may wrap what we raise)

        @jpype.JOverride
        def execute(self, *args):
            # execute(MailOptions, ThrowingRunnable, String, Object[]) is the abstract one
            command = next(a for a in args if hasattr(a, "run"))
            self.mails.append(command)

        def __len__(self) -> int:
            return len(self.mails)

        def run_one(self) -> bool:
            if not self.mails:
                return False
            self.mails.popleft().run()
            return True

        @jpype.JOverride
        def tryYield(self):
            # A drain polls the mailbox between its attempts: so many polls without one state batch
            # running means it cannot make progress (Flink spins, or re-posts its callback mail).
            self.spins += 1
            if self.spins > _SPIN_LIMIT:
                self.spins = 0
                self.stalled = True
                raise _Stalled()
            return self.run_one()

        @jpype.JOverride
        def shouldInterrupt(self):
            return False

    def _yield(self):  # "yield" is a Python keyword: set on the class by name below
        if not self.run_one():
            self.stalled = True
            raise _Stalled()

    setattr(Mailbox, "yield", jpype.JOverride(_yield))
    Mailbox = jpype.JImplements("org.apache.flink.api.common.operators.MailboxExecutor")(Mailbox)

    class NamedState:
        def __init__(self, name: str) -> None:
            self.name = name

        @jpype.JOverride
        def setCurrentNamespace(self, namespace):
            pass  # one namespace (VOID) per value state, as the reference's

        @jpype.JOverride
        def asyncClear(self):
            raise NotImplementedError("the harness clears through the controller")

        @jpype.JOverride
        def clear(self):
            raise NotImplementedError("the harness clears through the controller")

    # 2.0 on, a state request names its state's namespace (InternalPartitionedState); 1.20 has no such class
    NamedState = jpype.JImplements("org.apache.flink.api.common.state.v2.State", *(
        ("org.apache.flink.runtime.state.v2.internal.InternalPartitionedState",) if api.declarations else ()))(NamedState)

    @jpype.JImplements(api.container)
    class Container:
        def __init__(self) -> None:
            self.requests: list = []

        @jpype.JOverride
        def offer(self, request):
            self.requests.append(request)

        @jpype.JOverride
        def isEmpty(self):
            return not self.requests

    class SyncExecutor:
        def __init__(self, backend, names: dict, progress, batches) -> None:
            self.backend, self.names, self.progress, self.batches = backend, names, progress, batches

        def _run(self, request):
            kind = str(request.getRequestType().name())
            state = request.getState()
            name = getattr(state, "name", None) or self.names[int(jpype.java.lang.System.identityHashCode(state))]
            key = _python(request.getRecordContext().getKey())
            store = self.backend.store(name)
            payload = _python(request.getPayload())
            if kind == "VALUE_GET":
                value = store.get(key, VOID_NAMESPACE)
                request.getFuture().complete(None if value is None else jpype.java.lang.Integer(value))
                return
            if kind == "VALUE_UPDATE" and payload is not None:
                store.put(key, VOID_NAMESPACE, payload)
            elif kind in ("VALUE_UPDATE", "CLEAR"):
                store.remove(key, VOID_NAMESPACE)
            else:
                raise ValueError(f"the bridge's executor cannot run a {kind} request")
            request.getFuture().complete(None)

        @jpype.JOverride
        def executeBatchRequests(self, container):
            self.progress()
            # through the controller's ``state_executor`` (a harness observes batches there)
            self.batches(list(container.requests))
            return JClass("java.util.concurrent.CompletableFuture").completedFuture(None)

        def _container(self):
            return Container()

        @jpype.JOverride
        def executeRequestSync(self, request):
            self._run(request)

        @jpype.JOverride
        def fullyLoaded(self):
            return False

        @jpype.JOverride
        def shutdown(self):
            pass

    setattr(SyncExecutor, api.create_container, jpype.JOverride(SyncExecutor._container))
    if not api.executes_sync:  # 1.20's StateExecutor has neither
        del SyncExecutor.executeRequestSync, SyncExecutor.fullyLoaded
    SyncExecutor = jpype.JImplements(f"{_PACKAGE}.StateExecutor")(SyncExecutor)

    @jpype.JImplements(api.handler)
    class FailsTask:
        """Flink's operator fails its task with what it is handed (failExternally) and does not throw:
        thrown inside a CompletableFuture stage, it would be kept there and lost."""

        def __init__(self, owner) -> None:
            self.owner = owner

        @jpype.JOverride
        def handleException(self, message, exception):
            if self.owner._failed is None:
                self.owner._failed = RuntimeError(f"{message}: {exception}")

    _CLASSES.update(
        jpype=jpype, Mailbox=Mailbox, NamedState=NamedState, SyncExecutor=SyncExecutor, FailsTask=FailsTask,
        api=api, Controller=JClass(api.controller),
        DeclarationManager=JClass(f"{_PACKAGE}.declare.DeclarationManager") if api.declarations else None,
        ParallelMode=JClass(f"{_PACKAGE}.EpochManager$ParallelMode"),
        RequestType=JClass(f"{_PACKAGE}.StateRequestType"),
        Metrics=JClass("org.apache.flink.metrics.groups.UnregisteredMetricsGroup"),
        Integer=JClass("java.lang.Integer"),
    )
    return _CLASSES


def _python(value):
    """A Java value (boxed int, null) as Python's."""
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


class _Future:
    """A Flink future with the reference's ``then_*`` names; values cross as Python ints."""

    __slots__ = ("java", "owner", "done")

    def __init__(self, java, owner: "FlinkAsyncController") -> None:
        self.java, self.owner = java, owner
        self.done = False  # a future once done stays done: not asked again

    def _java_value(self, value):
        return None if value is None else self.owner._c["Integer"](value) if isinstance(value, int) else value

    def then_apply(self, fn: Callable):
        fn = self.owner._escaping(fn)
        return _Future(self.java.thenApply(lambda v: self._java_value(fn(_python(v)))), self.owner)

    def then_accept(self, fn: Callable):
        fn = self.owner._escaping(fn)
        return _Future(self.java.thenAccept(lambda v: fn(_python(v))), self.owner)

    def then_compose(self, fn: Callable):
        fn = self.owner._escaping(fn)
        return _Future(self.java.thenCompose(lambda v: fn(_python(v)).java), self.owner)

    def then_combine(self, other: "_Future", fn: Callable):
        fn = self.owner._escaping(fn)
        return _Future(self.java.thenCombine(other.java, lambda a, b: self._java_value(fn(_python(a), _python(b)))),
                       self.owner)

    def is_done(self) -> bool:
        if not self.done:
            java = self.java
            if hasattr(java, "isDone"):
                self.done = bool(java.isDone())
            else:  # 1.20's StateFutureImpl has no isDone: its CompletableFuture says; other futures are completed
                try:
                    self.done = bool(_field(java, "completableFuture").isDone())
                except AttributeError:
                    self.done = True
        return self.done


class _ValueState:
    __slots__ = ("owner", "name", "java")

    def __init__(self, owner: "FlinkAsyncController", name: str) -> None:
        self.owner, self.name = owner, name
        self.java = owner._state(name)

    def _request(self, kind: str, payload):
        c = self.owner._c
        java_payload = c["jpype"].JObject(None if payload is None else c["Integer"](payload), "java.lang.Object")
        return _Future(self.owner.aec.handleRequest(self.java, getattr(c["RequestType"], kind), java_payload),
                       self.owner)

    def async_value(self):
        return self._request("VALUE_GET", None)

    def async_update(self, value):
        return self._request("VALUE_UPDATE", value)

    def async_clear(self):
        return self._request("CLEAR", None)


class FlinkAsyncController:
    """See the module docstring; the keyword arguments are the reference controller's."""

    def __init__(self, batch_size: int = 1000, max_in_flight: int = 6000, buffer_timeout: int = 0, clock=None,
                 backend=None, *, threaded: bool = False,
                 epoch_parallel_mode: ParallelMode = ParallelMode.SERIAL_BETWEEN_EPOCH) -> None:
        if buffer_timeout:
            raise UsageError(f"Flink's buffer timeout runs on a wall-clock timer thread: the bridge builds the "
                             f"controller with buffer_timeout=0, got {buffer_timeout!r}")
        if threaded:
            raise UsageError("the Flink bridge runs the controller's batches on the task thread (threaded=False)")
        c = self._c = _classes()
        self.backend = backend if backend is not None else HeapStateBackend()
        self.mailbox = c["Mailbox"]()
        self._depth, self._escaped = 0, None  # _guarded's nesting; what a callback of ours raised
        self._failed = None  # what Flink's exception handler was handed (the task fails)
        self._names: dict[int, str] = {}
        self._states: dict[str, Any] = {}
        self._contexts: dict[int, object] = {}  # identity hash -> the Python token of a record context
        self._executor = executor = c["SyncExecutor"](self.backend, self._names, self._progress,
                                                      lambda requests: self.state_executor.execute_batch(
                                                          [_Request(r, self) for r in requests]))
        self.state_executor = _Executor(executor)
        self.key_accounting = _KeyAccounting(self)
        self.buffer = _Buffer(self)
        api = self.api = c["api"]
        if not api.parallel_epochs and epoch_parallel_mode is not ParallelMode.SERIAL_BETWEEN_EPOCH:
            raise UsageError("Flink before 2.1.0 runs epochs in SERIAL_BETWEEN_EPOCH mode only (the parallel mode "
                             "is a constructor argument from 2.1.0 on)")
        if not api.declarations:  # 1.20: no declaration manager, no metric group, serial epochs
            self.aec = c["Controller"](self.mailbox, c["FailsTask"](self), executor, 128, batch_size, 0,
                                       max_in_flight)
        elif not api.parallel_epochs:  # 2.0: the epoch mode is SERIAL_BETWEEN_EPOCH, fixed
            self.aec = c["Controller"](self.mailbox, c["FailsTask"](self), executor, c["DeclarationManager"](), 128,
                                       batch_size, 0, max_in_flight, None, c["Metrics"]())
        else:
            mode = c["ParallelMode"].valueOf(epoch_parallel_mode.name)
            self.aec = c["Controller"](self.mailbox, c["FailsTask"](self), executor, c["DeclarationManager"](), mode,
                                       128, batch_size, 0, max_in_flight, None, c["Metrics"]())

    # ------------------------------------------------------------ helpers

    def _state(self, name: str):
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = self._c["NamedState"](name)
            java = self._c["jpype"].JObject(state, "org.apache.flink.api.common.state.v2.State")
            self._names[int(self._c["jpype"].java.lang.System.identityHashCode(java))] = name
            self._states[name] = java
            state = java
        return state

    def _token(self, java_context):
        """One Python object per Java record context (the harness compares contexts with ``is``)."""
        if java_context is None:
            return None
        ident = int(self._c["jpype"].java.lang.System.identityHashCode(java_context))
        token = self._contexts.get(ident)
        if token is None or token.java is not java_context and not token.java.equals(java_context):
            token = self._contexts[ident] = _Context(java_context)
        return token

    def _progress(self) -> None:
        self.mailbox.spins = 0

    def _stall(self, target: int) -> DrainStalledError:
        return FlinkDrainStalled(int(self.aec.getInFlightRecordNum()))

    def _guarded(self, fn, target: int = 0):
        """``fn()``, a call into Flink's controller, which calls back into Python (the mailbox, the
        executor, cowcheck's callbacks). What comes out of it, the first of:

        - an exception of cowcheck's own (``is_ours``) raised in a callback, even if Flink wrapped
          it or lost it (a ``CompletableFuture`` stage keeps what its function throws);
        - a drain that stalled anywhere inside it (Flink may have wrapped what the mailbox raised,
          e.g. into its non-record exception handler): the reference's DrainStalledError;
        - another exception a callback raised, as it was;
        - a failure Flink handed its exception handler (the task fails: a CRASH of the step);
        - what ``fn`` raised or returned.

        The step time limit's interruption waits for the call's end (``held_back``): Flink's frames
        are never unwound by it. Calls nest (a timer fired inside a drain): the outermost decides."""
        if self._depth:
            return fn()
        self.mailbox.stalled = False
        self._escaped = self._failed = None
        raised = None
        self._depth += 1
        try:
            with held_back():
                try:
                    result = fn()
                except Exception as exc:
                    raised = exc
        finally:
            self._depth -= 1
        escaped, failed = self._escaped, self._failed
        if escaped is not None and escaped is not raised and is_ours(escaped):
            raise escaped
        if self.mailbox.stalled:
            raise self._stall(target) from None
        if escaped is not None and escaped is not raised:
            raise escaped from None
        if failed is not None:
            raise failed from raised
        if raised is not None:
            raise raised
        return result

    def _escaping(self, fn: Callable):
        """``fn`` as Flink calls it: the first thing it raises is kept, in case Flink wraps or loses it."""
        def run(*args):
            try:
                return fn(*args)
            except BaseException as exc:
                if self._escaped is None:
                    self._escaped = exc
                raise
        return run

    # ------------------------------------------------------------ the API

    def value_state(self, name: str) -> _ValueState:
        return _ValueState(self, name)

    @property
    def current_context(self):
        if not self.api.context_getter:  # 1.20 has no getCurrentContext
            return self._token(_field(self.aec, "currentContext"))
        return self._token(self.aec.getCurrentContext())

    def process_record(self, record, key, processing: Callable[[], Any]):
        """What Flink's operator does around processElement."""
        return self._in_context(record, key, processing, False)

    def process_timer(self, timer, key, callback: Callable[[], Any]):
        """What Flink's timer service does when a timer fires (maintainContextAndProcess): with
        overdraft from 2.0 on; 1.20's sync point has none."""
        return self._in_context(timer, key, callback, True)

    def _in_context(self, record, key, fn: Callable[[], Any], overdraft: bool):
        aec = self.aec
        jpype = self._c["jpype"]
        # a record that is not a Java value crosses as an object of its own (the controller only holds it)
        record = record if isinstance(record, (int, str)) else jpype.java.lang.Object()
        context = aec.buildContext(jpype.JObject(record), jpype.JObject(key))
        context.retain()
        aec.setCurrentContext(context)
        if self.api.overdraft:
            self._guarded(lambda: aec.syncPointRequestWithCallback(self._escaping(fn), overdraft))
        else:
            self._guarded(lambda: aec.syncPointRequestWithCallback(self._escaping(fn)))
        context.release()
        return self._token(context)

    def trigger_if_needed(self, force: bool = False) -> bool:
        """Whether a batch ran (1.20's triggerIfNeeded returns nothing: told by the active queue)."""
        before = self.buffer.active_queue_size()
        ran = self._guarded(lambda: self.aec.triggerIfNeeded(force))
        return bool(ran) if ran is not None else self.buffer.active_queue_size() < before

    def drain_inflight_records(self, target: int) -> None:
        self._guarded(lambda: self.aec.drainInflightRecords(target), target)

    def run_mailbox(self, limit: int | None = None, *, timers: bool = False) -> int:
        ran = 0
        while (limit is None or ran < limit) and self._guarded(self.mailbox.run_one):
            ran += 1
        return ran

    def process_non_record(self, trigger_action, final_action=None) -> None:
        if not self.api.final_actions:
            if final_action is not None:
                raise UsageError("Flink 1.20's processNonRecord takes one action: no final action")
            self._guarded(lambda: self.aec.processNonRecord(
                None if trigger_action is None else self._escaping(trigger_action)))
            return
        self._guarded(lambda: self.aec.processNonRecord(
            None if trigger_action is None else self._escaping(trigger_action),
            None if final_action is None else self._escaping(final_action)))

    @property
    def in_flight(self) -> int:
        return int(self.aec.getInFlightRecordNum())

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"FlinkAsyncController(in_flight={self.in_flight})"


# ------------------------------------------------------------ white box (reflection)


_FIELDS: dict = {}


def _field(obj, name: str):
    """A field of ``obj`` declared by its class or a superclass, read by reflection (looked up once)."""
    cls = obj.getClass()
    cache_key = (str(cls.getName()), name)
    field = _FIELDS.get(cache_key)
    if field is None:
        owner = cls
        while owner is not None:
            try:
                field = owner.getDeclaredField(name)
                break
            except Exception:
                owner = owner.getSuperclass()
        if field is None:
            raise AttributeError(f"no field {name!r} in {cls.getName()}")
        field.setAccessible(True)
        _FIELDS[cache_key] = field
    return field.get(obj)


class _Executor:
    """The controller's ``state_executor``: runs a batch of request views (the harness may wrap it)."""

    def __init__(self, java_executor) -> None:
        self.java_executor = java_executor

    def execute_batch(self, batch: list) -> None:
        for request in batch:
            self.java_executor._run(request.java)


class _Request:
    """A Flink state request as the harness sees one: its record context."""

    __slots__ = ("java", "context")

    def __init__(self, java, owner: "FlinkAsyncController") -> None:
        self.java = java
        self.context = owner._token(java.getRecordContext())


class _KeyAccounting:
    """Flink's KeyAccountingUnit: which record holds which key (``noConflictInFlightRecords``)."""

    def __init__(self, owner: "FlinkAsyncController") -> None:
        self.owner = owner

    @property
    def occupied(self) -> dict:
        held = _field(_field(self.owner.aec, "keyAccountingUnit"), "noConflictInFlightRecords")
        return {_python(k): _python(held.get(k)) for k in list(held.keySet())}

    def occupied_count(self) -> int:
        return len(self.occupied)


class _Buffer:
    """Flink's request buffer (StateRequestBuffer in 2.0, AsyncRequestBuffer from 2.1)."""

    def __init__(self, owner: "FlinkAsyncController") -> None:
        self.owner = owner
        self.seq_and_timeout = None  # no buffer timeout on the bridge

    def _java(self):
        return _field(self.owner.aec, self.owner.api.buffer_field)

    @property
    def active_queue(self) -> list:
        return [_Request(r, self.owner) for r in list(_field(self._java(), "activeQueue"))]

    def active_queue_size(self) -> int:
        return int(_field(self._java(), "activeQueue").size())

    @property
    def blocking_queue_size(self) -> int:
        return int(_field(self._java(), "blockingQueueSize"))


class _Context:
    """The Python token of a Flink record context (white-box fields by reflection). A context
    seen disposed (no references, key released) is not read again: the harness reads every
    context after every step, and Java calls for the finished ones would make that quadratic."""

    __slots__ = ("java", "disposed")

    def __init__(self, java) -> None:
        self.java = java
        self.disposed = False

    def _read(self) -> tuple[int, bool]:
        if self.disposed:
            return 0, False
        count, occupied = int(self.java.getReferenceCount()), bool(_field(self.java, "keyOccupied"))
        self.disposed = count == 0 and not occupied
        return count, occupied

    @property
    def ref_count(self) -> int:
        return self._read()[0]

    @property
    def key_occupied(self) -> bool:
        return self._read()[1]

    @property
    def record(self):
        return _python(self.java.getRecord())

    @property
    def key(self):
        return _python(self.java.getKey())

    def __repr__(self) -> str:
        return f"FlinkRecordContext({self.java})"
