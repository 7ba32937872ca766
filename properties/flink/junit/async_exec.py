"""The async machine's counterexamples as JUnit 5: Flink's own asynchronous execution controller.

The test lives in Flink's package ``org.apache.flink.runtime.asyncprocessing``
and builds what ``cowcheck.flink.async_controller`` builds, written out in
nested classes: a mailbox the test thread runs (``Mailbox``: a drain that polls
it 1,000 times with no state request run in between cannot make progress, and
says so instead of spinning for ever, as the bridge does), a state executor that
runs each batch at once against a map per state, value states by name, and
``Aec``: the controller with the records' programs of chained async calls
(:mod:`cowcheck.async_exec.records`), timers fired as Flink's timer service fires
them, and non-records whose actions check the epoch rules of A11 as the
machine's harness does. The controller's API differs by generation (1.20.x,
2.0.x, 2.1 on: ``StateExecutionController``); what differs is reached by
reflection (the constructor's arguments by their types, the executor and
container interfaces by ``java.lang.reflect.Proxy``, ``processNonRecord`` and
``syncPointRequestWithCallback`` by their arity), so one source compiles and
runs on every release that has the controller (1.20.0 on), taking final actions
and timers' overdraft where the release has them.
"""

from __future__ import annotations

import attrs

from cowcheck.async_exec.harness import AsyncMachineConfig
from cowcheck.async_exec.ops import ASYNC_OPS
from cowcheck.core.failures import TIMEOUT
from cowcheck.flink.async_controller import api_from
from cowcheck.flink.junit.writer import JUnitUnsupported, Writer, java_string

__all__ = ["AsyncWriter"]


def _program(program) -> str:
    statements = []
    for op, *args in program:
        statements.append("{" + ", ".join([java_string(op), *(java_string(a) if isinstance(a, str) else str(int(a))
                                                                for a in args)]) + "}")
    return "new Object[][] {" + ", ".join(statements) + "}"


def _timers(timers) -> str:
    return "new Object[][] {" + ", ".join("{" + f"{int(key)}, {_program(program)}" + "}"
                                          for key, program in timers) + "}"


class AsyncWriter(Writer):
    operations = ASYNC_OPS
    package = "org.apache.flink.runtime.asyncprocessing"
    crash_code = "A10"
    needs_model = False  # A10 and A11 need no values of the model
    imports = ("java.lang.reflect.Constructor", "java.lang.reflect.InvocationHandler",
               "java.lang.reflect.InvocationTargetException", "java.lang.reflect.Method", "java.lang.reflect.Proxy",
               "java.util.ArrayDeque", "java.util.ArrayList", "java.util.HashMap", "java.util.List", "java.util.Map",
               "java.util.concurrent.CompletableFuture",
               "org.apache.flink.api.common.operators.MailboxExecutor",
               "org.apache.flink.api.common.state.v2.State",
               "org.apache.flink.api.common.state.v2.StateFuture",
               "org.apache.flink.metrics.groups.UnregisteredMetricsGroup",
               "org.apache.flink.util.function.BiFunctionWithException",
               "org.apache.flink.util.function.FunctionWithException",
               "org.apache.flink.util.function.ThrowingConsumer",
               "org.apache.flink.util.function.ThrowingRunnable",
               "static org.junit.jupiter.api.Assumptions.assumeTrue")
    cannot = {}

    def config(self) -> AsyncMachineConfig:
        fields = attrs.fields_dict(AsyncMachineConfig)
        return attrs.evolve(AsyncMachineConfig(), **{k: v for k, v in self.cx.settings.items() if k in fields})

    def setup(self) -> list[str]:
        config = self.config()
        mode = "PARALLEL_BETWEEN_EPOCH" if config.epoch_mode == "parallel" else "SERIAL_BETWEEN_EPOCH"
        return ["// The controller as cowcheck's async machine builds it on Flink: batch size "
                f"{config.batch_size}, at most {config.max_in_flight} records in flight,",
                "// no buffer timeout, a deterministic mailbox and state executor.",
                "Mailbox mailbox = new Mailbox();",
                f"Aec aec = Aec.create(mailbox, {config.batch_size}, {config.max_in_flight}, {java_string(mode)});"]

    # ------------------------------------------------------------ steps

    def step_arrive(self, key, program):
        return [f"aec.arrive({int(key)}, {_program(program)});"]

    def step_advance_time(self, millis):
        return [f"aec.runMail(Integer.MAX_VALUE);  // no buffer timeout: time passing only runs the mailbox "
                f"({millis} ms)"]

    def step_trigger(self):
        return ["aec.controller.triggerIfNeeded(true);"]

    def step_drain(self, target):
        return [f"aec.controller.drainInflightRecords({int(target)});"]

    def step_run_mail(self, limit):
        return [f"aec.runMail({int(limit)});"]

    def step_non_record(self, timers):
        return [f"aec.nonRecord({_timers(timers)});"]

    # ------------------------------------------------------------ failing checks

    def _crash(self, failure) -> bool:
        """A stalled drain (TIMEOUT A10) is checked around any step, as a crash is."""
        return failure.code == "A10"

    def expected(self) -> str:
        failure = self.cx.failure
        if failure.kind == TIMEOUT:
            return "the step returns: every drain inside it finishes"
        if failure.code == "A11":
            return ("the non-record's trigger action runs once, with no record context current, after every record "
                    "before it finished; its final action once, after it and the timers it fired")
        return "no error"

    def no_exception(self, code: str, body: list[str], what: str) -> list[str]:
        if self.cx.failure.kind != TIMEOUT:
            return super().no_exception(code, body, what)
        message = java_string(f"A10: {what}: a drain cannot make progress (Flink waits for ever)")
        return ["try {", *("    " + line for line in body), "} catch (Exception e) {",
                "    if (!mailbox.stalled) throw e;", "}", f"assertFalse(mailbox.stalled, {message});"]

    def fails_non_record(self, timers):
        if self.cx.failure.code != "A11":
            return self.no_exception(self.cx.failure.code, self.step_non_record(timers), "non_record")
        message = java_string(f"A11: the epoch rules of non-record n{self._nid()}")
        return [*self.step_non_record(timers), f"assertEquals(List.of(), aec.violations, {message});"]

    def _nid(self) -> int:
        return sum(1 for step in self.cx.steps[:self.failing] if step.op == "non_record")

    def check_expressible(self) -> None:
        super().check_expressible()
        failure = self.cx.failure
        step = self.cx.steps[self.failing]
        if self.index is not None:
            api = api_from(self.index)
            if api is None:
                raise JUnitUnsupported(f"{self.file_name}: {self.written_for} has no async controller (Flink's "
                                       f"AsyncExecutionController exists from 1.20.0 on)")
            if self.config().epoch_mode == "parallel" and not api.parallel_epochs:
                raise JUnitUnsupported(f"{self.file_name}: a program in parallel epochs; {self.written_for} runs "
                                       f"epochs in SERIAL_BETWEEN_EPOCH mode only")
        if failure.code not in ("A10", "A11") or failure.code == "A11" and step.op != "non_record":
            raise JUnitUnsupported(f"{self.file_name}: the check of step {self.failing} ({step.op}: {failure.kind} "
                                   f"{failure.code}) cannot be written as JUnit yet (A10, and A11 at a non-record, "
                                   f"can)")

    def nested(self) -> str:
        return _NESTED


_NESTED = r'''
static final String P = "org.apache.flink.runtime.asyncprocessing.";

/** The mailbox: a queue the test thread runs. A drain polling it 1,000 times with no state request run in
 *  between cannot make progress (Flink would spin for ever): it is stopped, and the mailbox says so. */
static final class Mailbox implements MailboxExecutor {
    final ArrayDeque<ThrowingRunnable<? extends Exception>> mails = new ArrayDeque<>();
    int spins;
    boolean stalled;

    @Override public void execute(MailOptions options, ThrowingRunnable<? extends Exception> command, String description,
                                  Object... arguments) {
        mails.add(command);
    }

    boolean runOne() {
        ThrowingRunnable<? extends Exception> mail = mails.poll();
        if (mail == null) return false;
        try {
            mail.run();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        return true;
    }

    @Override public void yield() { if (!runOne()) stall(); }
    @Override public boolean tryYield() { if (++spins > 1000) stall(); return runOne(); }
    @Override public boolean shouldInterrupt() { return false; }

    void stall() {
        stalled = true;
        throw new IllegalStateException("the drain cannot make progress: no mail and no state request to run in "
                + "1,000 polls of the mailbox (Flink waits for ever)");
    }
}

/** A named value state (Flink's State v2 interface, and InternalPartitionedState where it exists). */
static final class NamedState implements InvocationHandler {
    final String name;
    NamedState(String name) { this.name = name; }
    @Override public Object invoke(Object proxy, Method m, Object[] args) {
        switch (m.getName()) {
            case "setCurrentNamespace": return null;
            case "hashCode": return System.identityHashCode(proxy);
            case "equals": return proxy == args[0];
            case "toString": return "State(" + name + ")";
            default: throw new UnsupportedOperationException(m.getName());
        }
    }
}

/** A batch of requests (StateRequestContainer up to 2.0, AsyncRequestContainer from 2.1). */
static final class Container implements InvocationHandler {
    final List<Object> requests = new ArrayList<>();
    @Override public Object invoke(Object proxy, Method m, Object[] args) {
        switch (m.getName()) {
            case "offer": requests.add(args[0]); return null;
            case "isEmpty": return requests.isEmpty();
            case "hashCode": return System.identityHashCode(proxy);
            case "equals": return proxy == args[0];
            default: return "Container" + requests;
        }
    }
}

/** Flink's controller of this release, the records' programs, and the epoch rules of A11 (violations). */
@SuppressWarnings({"rawtypes", "unchecked"})
static final class Aec {
    final Mailbox mailbox;
    final Map<String, Map<Object, Integer>> store = new HashMap<>();
    final Map<String, State> states = new HashMap<>();
    final List<Record> records = new ArrayList<>();
    final List<NonRecord> nonRecords = new ArrayList<>();
    final List<String> violations = new ArrayList<>();
    final boolean serial;
    AsyncExecutionController controller;  // raw: one type parameter up to 2.0, two from 2.1
    Method handleRequest, syncPoint, processNonRecord;

    static final class Record {
        final int id;
        RecordContext context;
        boolean done;
        Record(int id) { this.id = id; }
    }

    static final class NonRecord {
        final int id, before;
        int triggers, finals;
        final List<Record> spawned = new ArrayList<>();
        NonRecord(int id, int before) { this.id = id; this.before = before; }
    }

    private Aec(Mailbox mailbox, boolean serial) { this.mailbox = mailbox; this.serial = serial; }

    static Aec create(Mailbox mailbox, int batchSize, int maxInFlight, String epochMode) throws Exception {
        Aec aec = new Aec(mailbox, epochMode.startsWith("SERIAL"));
        Class<?> type;
        try {
            type = Class.forName(P + "StateExecutionController");  // 2.1 on
        } catch (ClassNotFoundException older) {
            type = AsyncExecutionController.class;
        }
        Constructor<?> c = type.getConstructors()[0];
        Class<?>[] types = c.getParameterTypes();
        Object[] args = new Object[types.length];
        int[] ints = {128, batchSize, maxInFlight};  // max parallelism, batch size, max in flight
        int nextInt = 0;
        for (int i = 0; i < types.length; i++) {
            String name = types[i].getSimpleName();
            if (types[i] == MailboxExecutor.class) args[i] = mailbox;
            else if (name.equals("AsyncFrameworkExceptionHandler")) args[i] = proxy(types[i], (p, m, a) -> {
                if (m.getName().equals("handleException")) throw new RuntimeException((String) a[0], (Throwable) a[1]);
                return m.getName().equals("hashCode") ? 0 : null;
            });
            else if (name.equals("StateExecutor") || name.equals("AsyncExecutor")) args[i] = aec.executor();
            else if (name.equals("DeclarationManager")) args[i] = types[i].getConstructor().newInstance();
            else if (name.equals("ParallelMode")) args[i] = Enum.valueOf((Class) types[i], epochMode);
            else if (types[i] == int.class) args[i] = ints[nextInt++];
            else if (types[i] == long.class) args[i] = 0L;  // no buffer timeout
            else if (name.equals("MetricGroup")) args[i] = new UnregisteredMetricsGroup();
            else args[i] = null;  // the switch-context listener
        }
        // Not a failure of this release: the program cannot run on it (as the Python replay says "not applicable").
        assumeTrue(aec.serial || type.getSimpleName().equals("StateExecutionController"),
                "this release runs epochs in SERIAL_BETWEEN_EPOCH mode only");
        aec.controller = (AsyncExecutionController) c.newInstance(args);
        for (Method m : type.getMethods()) {
            if (m.getName().equals("handleRequest") && m.getParameterCount() == 3) aec.handleRequest = m;
            if (m.getName().equals("syncPointRequestWithCallback")) aec.syncPoint = m;
            if (m.getName().equals("processNonRecord")) aec.processNonRecord = m;
        }
        return aec;
    }

    static Object proxy(Class<?> type, InvocationHandler handler) {
        return Proxy.newProxyInstance(Aec.class.getClassLoader(), new Class<?>[] {type}, handler);
    }

    static Object call(Method m, Object target, Object... args) throws Exception {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) throw (Exception) cause;
            throw (Error) cause;
        }
    }

    /** The state executor: runs a batch at once on the calling thread, against a map per state. */
    Object executor() throws Exception {
        return proxy(Class.forName(P + "StateExecutor"), (p, m, a) -> {
            switch (m.getName()) {
                case "executeBatchRequests":
                    mailbox.spins = 0;  // progress: a drain waiting for it goes on
                    for (Object r : ((Container) Proxy.getInvocationHandler(a[0])).requests) run((StateRequest) r);
                    return CompletableFuture.completedFuture(null);
                case "createStateRequestContainer": case "createRequestContainer":
                    return proxy(m.getReturnType(), new Container());
                case "executeRequestSync": run((StateRequest) a[0]); return null;
                case "fullyLoaded": return false;
                case "hashCode": return System.identityHashCode(p);
                case "equals": return p == a[0];
                default: return null;
            }
        });
    }

    void run(StateRequest r) {
        Map<Object, Integer> s = store.computeIfAbsent(
                ((NamedState) Proxy.getInvocationHandler(r.getState())).name, n -> new HashMap<>());
        Object key = r.getRecordContext().getKey();
        switch (r.getRequestType()) {
            case VALUE_GET: r.getFuture().complete(s.get(key)); return;
            case VALUE_UPDATE:
                if (r.getPayload() != null) s.put(key, (Integer) r.getPayload()); else s.remove(key);
                break;
            case CLEAR: s.remove(key); break;
            default: throw new IllegalArgumentException("a request this test's executor does not run: " + r.getRequestType());
        }
        r.getFuture().complete(null);
    }

    State state(Object name) throws Exception {
        State s = states.get(name);
        if (s == null) {
            List<Class<?>> types = new ArrayList<>(List.of(State.class));
            try {
                types.add(Class.forName("org.apache.flink.runtime.state.v2.internal.InternalPartitionedState"));  // 2.0 on
            } catch (ClassNotFoundException older) {
                // 1.20: states have no namespace
            }
            s = (State) Proxy.newProxyInstance(Aec.class.getClassLoader(), types.toArray(new Class<?>[0]),
                    new NamedState((String) name));
            states.put((String) name, s);
        }
        return s;
    }

    StateFuture request(Object name, StateRequestType type, Object payload) throws Exception {
        return (StateFuture) call(handleRequest, controller, state(name), type, payload);
    }

    static int plus(Object a, Object b) { return (a == null ? 0 : (Integer) a) + (b == null ? 0 : (Integer) b); }

    /** One statement of a record's program (cowcheck's async model), as chained async state calls. */
    StateFuture statement(Object[] s) throws Exception {
        switch ((String) s[0]) {
            case "add": {
                Object name = s[1], delta = s[2];
                return request(name, StateRequestType.VALUE_GET, null)
                        .thenApply((FunctionWithException) v -> plus(v, delta))
                        .thenCompose((FunctionWithException) v -> request(name, StateRequestType.VALUE_UPDATE, v));
            }
            case "add_in_accept": {  // the write is fired inside the callback, not chained
                Object name = s[1], delta = s[2];
                return request(name, StateRequestType.VALUE_GET, null).thenAccept(
                        (ThrowingConsumer) v -> request(name, StateRequestType.VALUE_UPDATE, plus(v, delta)));
            }
            case "sum": {
                Object target = s[3];
                return request(s[1], StateRequestType.VALUE_GET, null)
                        .thenCombine(request(s[2], StateRequestType.VALUE_GET, null),
                                (BiFunctionWithException) (x, y) -> plus(x, y))
                        .thenCompose((FunctionWithException) v -> request(target, StateRequestType.VALUE_UPDATE, v));
            }
            case "read": return request(s[1], StateRequestType.VALUE_GET, null).thenAccept((ThrowingConsumer) v -> { });
            case "put": return request(s[1], StateRequestType.VALUE_UPDATE, s[2]);
            case "clear": return request(s[1], StateRequestType.CLEAR, null);
            default: throw new IllegalArgumentException("no statement " + s[0]);
        }
    }

    /** Statement i, then (once it completes) the rest of the program. */
    StateFuture program(Object[][] program, int i) throws Exception {
        StateFuture done = statement(program[i]);
        return i + 1 == program.length ? done
                : done.thenCompose((FunctionWithException) v -> program(program, i + 1));
    }

    /** A record (or a timer: overdraft where the release has it) runs its program in its own context. */
    Record inContext(int key, Object[][] program, boolean timer) throws Exception {
        Record record = new Record(records.size());
        records.add(record);
        RecordContext context = controller.buildContext(record.id, key);
        record.context = context;
        context.retain();
        controller.setCurrentContext(context);
        ThrowingRunnable<Exception> processing =
                () -> program(program, 0).thenAccept((ThrowingConsumer) v -> record.done = true);
        if (syncPoint.getParameterCount() == 2) call(syncPoint, controller, processing, timer);
        else call(syncPoint, controller, processing);
        context.release();
        return record;
    }

    void arrive(int key, Object[][] program) throws Exception {
        inContext(key, program, false);
    }

    void runMail(int limit) {
        for (int i = 0; i < limit && mailbox.runOne(); i++) { }
    }

    boolean finished(Record r) {
        return r.done && r.context.getReferenceCount() == 0;
    }

    /** A non-record (a watermark): its trigger fires timers on the records' keys; the epoch rules checked. */
    void nonRecord(Object[][] timers) throws Exception {
        NonRecord nr = new NonRecord(nonRecords.size(), records.size());
        nonRecords.add(nr);
        boolean finals = processNonRecord.getParameterCount() == 2;
        ThrowingRunnable<Exception> trigger = () -> onTrigger(nr, timers, finals);
        ThrowingRunnable<Exception> last = () -> onFinal(nr);
        if (finals) call(processNonRecord, controller, trigger, last);
        else call(processNonRecord, controller, trigger);
        if (serial && (nr.triggers != 1 || nr.finals != (finals ? 1 : 0))) {
            violations.add("n" + nr.id + ": returned in serial mode before its epoch finished (trigger ran "
                    + nr.triggers + ", final ran " + nr.finals + " times)");
        }
    }

    void onTrigger(NonRecord nr, Object[][] timers, boolean finals) throws Exception {
        if (++nr.triggers > 1) {
            violations.add("n" + nr.id + ": its trigger action ran " + nr.triggers + " times");
            return;
        }
        if (controller.currentContext != null) {
            violations.add("n" + nr.id + ": its trigger action ran with a record context current ("
                    + controller.currentContext + ")");
        }
        NonRecord previous = nr.id > 0 ? nonRecords.get(nr.id - 1) : null;
        if (previous != null && (finals ? previous.finals : previous.triggers) != 1) {
            violations.add("n" + nr.id + ": its trigger action ran before the final action of n" + previous.id);
        }
        for (Record r : records.subList(0, nr.before)) {
            if (!finished(r)) violations.add("n" + nr.id + ": its trigger action ran while record r" + r.id
                    + ", which arrived before it, had not finished");
        }
        for (Object[] timer : timers) nr.spawned.add(inContext((Integer) timer[0], (Object[][]) timer[1], true));
    }

    void onFinal(NonRecord nr) {
        if (++nr.finals > 1) {
            violations.add("n" + nr.id + ": its final action ran " + nr.finals + " times");
            return;
        }
        if (nr.triggers != 1) violations.add("n" + nr.id + ": its final action ran before its trigger action");
        for (Record r : nr.spawned) {
            if (!finished(r)) violations.add("n" + nr.id + ": its final action ran while record r" + r.id
                    + ", which its trigger started, had not finished");
        }
    }
}
'''
