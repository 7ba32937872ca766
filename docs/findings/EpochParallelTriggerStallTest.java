package org.apache.flink.runtime.asyncprocessing;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.common.operators.MailboxExecutor;
import org.apache.flink.api.common.state.v2.State;
import org.apache.flink.api.common.state.v2.StateFuture;
import org.apache.flink.metrics.groups.UnregisteredMetricsGroup;
import org.apache.flink.util.function.BiFunctionWithException;
import org.apache.flink.util.function.FunctionWithException;
import org.apache.flink.util.function.ThrowingConsumer;
import org.apache.flink.util.function.ThrowingRunnable;
import org.junit.jupiter.api.Test;

/**
 * Replays cowcheck's counterexample epoch-parallel-trigger-stall.json (async machine) on Flink's own classes,
 * written for flink (Apache Flink 2.3.0): it fails where the bug is (timeout A10 at step 6) and passes where it is fixed.
 * Self-contained: Flink's jars and JUnit 5 are all it needs on the class path.
 */
class EpochParallelTriggerStallTest {
    @Test
    void replay() throws Exception {
        // The controller as cowcheck's async machine builds it on Flink: batch size 3, at most 4 records in flight,
        // no buffer timeout, a deterministic mailbox and state executor.
        Mailbox mailbox = new Mailbox();
        Aec aec = Aec.create(mailbox, 3, 4, "PARALLEL_BETWEEN_EPOCH");

        // step 0: arrive(aec, 0, [['add', 'b', 2]])
        aec.arrive(0, new Object[][] {{"add", "b", 2}});

        // step 1: non_record(aec, [[1, [['sum', 'a', 'a', 'a'], ['sum', 'b', 'b', 'b'], ['add', 'a', 2]]]])
        aec.nonRecord(new Object[][] {{1, new Object[][] {{"sum", "a", "a", "a"}, {"sum", "b", "b", "b"}, {"add", "a", 2}}}});

        // step 2: arrive(aec, 0, [['sum', 'a', 'a', 'b']])
        aec.arrive(0, new Object[][] {{"sum", "a", "a", "b"}});

        // step 3: arrive(aec, 0, [['add', 'b', 1]])
        aec.arrive(0, new Object[][] {{"add", "b", 1}});

        // step 4: arrive(aec, 0, [['add_in_accept', 'b', 3]])
        aec.arrive(0, new Object[][] {{"add_in_accept", "b", 3}});

        // step 5: arrive(aec, 0, [['sum', 'a', 'b', 'a']])
        aec.arrive(0, new Object[][] {{"sum", "a", "b", "a"}});

        // step 6: arrive(aec, 0, [['sum', 'a', 'a', 'a']])   <-- fails here
        // A10: The controller makes progress and does not raise. (docs/contract.md#a10)
        // the model expects: the step returns: every drain inside it finishes
        try {
            aec.arrive(0, new Object[][] {{"sum", "a", "a", "a"}});
        } catch (Exception e) {
            if (!mailbox.stalled) throw e;
        }
        assertFalse(mailbox.stalled, "A10: arrive(aec, 0, [['sum', 'a', 'a', 'a']]): a drain cannot make progress (Flink waits for ever)");
    }

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
}
