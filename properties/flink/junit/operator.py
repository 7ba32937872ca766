"""The operator machine's counterexamples as JUnit 5: Flink's own ``DefaultOperatorStateBackend``.

The test builds what ``cowcheck.bridge.OperatorHandle`` builds, written out in a
nested class ``Job``: one backend per parallel instance by Flink's
``DefaultOperatorStateBackendBuilder`` (the same constructor from 1.13.6 to
2.3.0), the ten states of :data:`~cowcheck.operator.ops.STATES` registered
through descriptors as an operator's ``initializeState`` registers them,
checkpoints by each backend's own ``snapshot`` into a
``MemCheckpointStreamFactory`` (every synchronous part, then every
asynchronous part on the task thread), compressed ones (1.18.0 on) through a
second ``SnapshotStrategyRunner`` whose strategy has the snappy decorator,
built by reflection (on an older release the test is aborted: it does not
apply there), and restores through ``RoundRobinOperatorStateRepartitioner``.
One source compiles on every release 1.13.6-2.3.0.

The expected values are the reference's (2.3.0's null handling): a restore is
compared as one text, a line per instance and state (split lists in order at
the same parallelism, else their sizes and elements over all instances; union
lists as sorted multisets; broadcast maps by key), built the same way in Java
and here. A step whose arguments hold a null runs in a ``try`` when it is not
the failing one: releases before 1.19.0 take some such nulls, later ones
reject them. Checkpoints whose asynchronous parts run on threads of their own,
checkpoints to files, and savepoints are not written yet.
"""

from __future__ import annotations

import copy
from collections import Counter

from cowcheck.core.boundary import build
from cowcheck.core.failures import CheckFailure
from cowcheck.core.replay import replay_setup
from cowcheck.flink.junit.writer import JUnitUnsupported, Writer, java_string
from cowcheck.operator.ops import OPERATOR_OPS, SPECS, STATES, entries_of, value_of, values_of

__all__ = ["OperatorWriter", "java_text"]

_WRITES = frozenset({"add", "add_all", "update", "put", "put_all", "remove"})
_THREADS = "asynchronous parts on threads of their own, racing the task thread, are not written as JUnit yet"
_SAVEPOINTS = "savepoints (the snapshot with savepoint options, built by reflection per release) are not written as " \
              "JUnit yet"


def java_text(value) -> str:
    """A value as ``Job.show`` prints Flink's: Java's ``toString`` forms, maps sorted by their keys' text.

    >>> java_text({"s1": None, 2: [0, None]}), java_text(True)
    ('{2=[0, null], s1=null}', 'true')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        pairs = sorted((java_text(k), java_text(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}={v}" for k, v in pairs) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(java_text, value)) + "]"
    return str(value)


def _sorted_text(elements) -> str:
    """A multiset of elements as ``Job.sorted`` prints it: each element's text, sorted."""
    return "[" + ", ".join(sorted(java_text(e) for e in elements)) + "]"


def _elements(counter: Counter) -> list:
    """The elements of a multiset of canonical values (a list is ``("list", tuple)``)."""
    out = []
    for value, n in counter.items():
        plain = list(value[1]) if isinstance(value, tuple) and value[:1] == ("list",) else value
        out += [plain] * n
    return out


def _literal(kind: str, value) -> str:
    """A value of ``kind`` as the Java object Flink holds: Integer, Long, String, ArrayList<Integer>."""
    if value is None:
        return "null"
    if kind == "long":
        return f"{value}L"
    if kind == "string":
        return java_string(value)
    if kind == "list":
        return "Job.ints(" + ", ".join("null" if v is None else str(v) for v in value) + ")"
    return str(value)


def _arguments(literals: list) -> str:
    """Varargs: a lone null cast, so that Java passes an array holding it, not a null array."""
    return "(Object) null" if literals == ["null"] else ", ".join(literals)


def _holds_none(value) -> bool:
    if isinstance(value, dict):
        return any(k is None or v is None for k, v in value.items())
    return value is None or isinstance(value, list) and None in value


def expectation_lines(expect) -> list[str]:
    """What ``Job.view`` must print of a job restored as the model's Expectation says, line by line."""
    lines = []
    exact = expect.split_exact is not None
    for i in range(expect.new_parallelism):
        for spec in STATES:
            if spec.broadcast:
                lines.append(f"{i} {spec.name} {java_text(expect.broadcast[i][spec.name])}")
            elif spec.mode == "UNION":
                lines.append(f"{i} {spec.name} {_sorted_text(_elements(expect.union[spec.name]))}")
            elif exact:
                lines.append(f"{i} {spec.name} {java_text(expect.split_exact[i][spec.name])}")
    if not exact:
        for name, total in expect.split_total.items():
            lines.append(f"{name} sizes {expect.split_sizes[name]} elements {_sorted_text(_elements(total))}")
    return lines


class OperatorWriter(Writer):
    operations = OPERATOR_OPS
    package = "org.apache.flink.runtime.state"
    crash_code = "O7"
    imports = ("java.lang.reflect.Constructor", "java.lang.reflect.Field", "java.util.ArrayList",
               "java.util.Arrays", "java.util.Collection", "java.util.Collections", "java.util.HashMap",
               "java.util.List", "java.util.Map", "java.util.concurrent.RunnableFuture",
               "org.apache.flink.api.common.ExecutionConfig",
               "org.apache.flink.api.common.state.BroadcastState",
               "org.apache.flink.api.common.state.ListState",
               "org.apache.flink.api.common.state.ListStateDescriptor",
               "org.apache.flink.api.common.state.MapStateDescriptor",
               "org.apache.flink.api.common.typeutils.TypeSerializer",
               "org.apache.flink.api.common.typeutils.base.IntSerializer",
               "org.apache.flink.api.common.typeutils.base.ListSerializer",
               "org.apache.flink.api.common.typeutils.base.LongSerializer",
               "org.apache.flink.api.common.typeutils.base.StringSerializer",
               "org.apache.flink.core.fs.CloseableRegistry",
               "org.apache.flink.runtime.checkpoint.CheckpointOptions",
               "org.apache.flink.runtime.checkpoint.RoundRobinOperatorStateRepartitioner",
               "org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory",
               "static org.junit.jupiter.api.Assumptions.assumeTrue")
    cannot = {"checkpoint_async": _THREADS, "join": _THREADS, "savepoint": _SAVEPOINTS, "savepoint_async": _SAVEPOINTS}
    # The model is read at every step, not only the failing one: write() replays the program on the reference once.
    needs_model = False

    def check_expressible(self) -> None:
        super().check_expressible()
        for i, step in enumerate(self.cx.steps[:self.failing + 1]):
            if step.op == "checkpoint" and step.args[2] != "memory":
                raise JUnitUnsupported(f"{self.file_name}: step {i} checkpoints to {step.args[2]!r}; only checkpoints "
                                       f"to memory are written as JUnit yet")

    def write(self):
        self.facts, self.model = self._replay()
        return super().write()

    def _replay(self) -> tuple:
        """The program before the failing step replayed on the reference: per step, what its Java needs of the
        model (``facts``: a checkpoint's writability, a mutated element, whether a checkpoint was kept), and the
        harness at the failing step."""
        _, make, options, kind = replay_setup(self.cx, "reference")
        harness = kind.harness_class(build(make), **options)
        facts = {}
        for i, step in enumerate(self.cx.steps[:self.failing]):
            facts[i] = self._fact(harness, step)
            try:
                harness.apply(step)
            except CheckFailure as exc:
                raise JUnitUnsupported(f"{self.file_name}: the reference fails at step {i} ({exc.failure.kind} "
                                       f"{exc.failure.code}), before the failing step {self.failing}") from None
        return facts, harness

    @staticmethod
    def _fact(harness, step):
        if step.op == "checkpoint":
            return harness.model.writable(harness.model.freeze())
        if step.op in ("restore", "recover"):
            return step.args[0] in harness.handles
        if step.op == "mutate":
            instance, name, where, _ = step.args
            instance %= len(harness.backends)
            spec = SPECS[name]
            if spec.broadcast:
                key = value_of(spec.key_type, where)
                return key if harness.model.read(instance, name, "get", key) is not None else ()
            current = [e for e in harness.model.read(instance, name, "get") if e is not None]
            return sorted(current, key=repr)[where % len(current)] if current else ()
        return None

    def step_lines(self, i, step):
        self._at = i
        return super().step_lines(i, step)

    def setup(self) -> list[str]:
        return ["Job op = null;"]

    def _compressed(self, compressed) -> bool:
        """Whether the checkpoint is compressed; a compressed one in a program whose settings have no
        compression cannot run (the replay refuses it too: never taken uncompressed instead)."""
        if compressed and not self.cx.settings.get("compression", True):
            raise JUnitUnsupported(f"{self.file_name}: a compressed checkpoint in a program run without "
                                   f"operator-state compression cannot run")
        return bool(compressed)

    # ------------------------------------------------------------ state-level steps

    def _state(self, instance, name) -> str:
        kind = "broadcast" if SPECS[name].broadcast else "list"
        return f"op.{kind}({instance}, {java_string(name)})"

    def _call(self, instance, name, call: str, args: tuple) -> list[str]:
        line = f"{self._state(instance, name)}.{call};"
        if not any(_holds_none(a) for a in args):
            return [line]
        return ["try {  // a null: releases from 1.19.0 reject some that older ones take", f"    {line}",
                "} catch (Exception rejected) {", "    // as the release does", "}"]

    def _add(self, instance, name, code):
        value = value_of(SPECS[name].kind, code)
        return f"add({_literal(SPECS[name].kind, value)})", (value,)

    def _list_of(self, verb, instance, name, codes):
        kind = SPECS[name].kind
        values = values_of(kind, codes)
        text = "null" if values is None else f"Job.values({_arguments([_literal(kind, v) for v in values])})"
        return f"{verb}({text})", (values,)

    def _put(self, instance, name, key, value):
        spec = SPECS[name]
        k, v = value_of(spec.key_type, key), value_of(spec.kind, value)
        return f"put({_literal(spec.key_type, k)}, {_literal(spec.kind, v)})", (k, v)

    def _put_all(self, instance, name, pairs):
        spec = SPECS[name]
        entries = entries_of(spec, pairs)
        if entries is None:
            return "putAll(null)", (None,)
        items = [x for k, v in entries.items() for x in (_literal(spec.key_type, k), _literal(spec.kind, v))]
        return f"putAll(Job.entries({', '.join(items)}))", (entries,)

    def _remove(self, instance, name, key):
        k = value_of(SPECS[name].key_type, key)
        return f"remove({_literal(SPECS[name].key_type, k)})", (k,)

    def step_add(self, instance, name, code):
        return self._call(instance, name, *self._add(instance, name, code))

    def step_add_all(self, instance, name, codes):
        return self._call(instance, name, *self._list_of("addAll", instance, name, codes))

    def step_update(self, instance, name, codes):
        return self._call(instance, name, *self._list_of("update", instance, name, codes))

    def step_clear(self, instance, name):
        return [f"op.clear({instance}, {java_string(name)});"]

    def step_put(self, instance, name, key, value):
        return self._call(instance, name, *self._put(instance, name, key, value))

    def step_put_all(self, instance, name, pairs):
        return self._call(instance, name, *self._put_all(instance, name, pairs))

    def step_remove(self, instance, name, key):
        return self._call(instance, name, *self._remove(instance, name, key))

    def step_get(self, instance, name):
        return [f"{self._state(instance, name)}.get();"]

    @staticmethod
    def _key(name, key) -> str:
        return _literal(SPECS[name].key_type, value_of(SPECS[name].key_type, key))

    def step_lookup(self, instance, name, key):
        return [f"{self._state(instance, name)}.get({self._key(name, key)});"]

    def step_contains(self, instance, name, key):
        return [f"{self._state(instance, name)}.contains({self._key(name, key)});"]

    def step_entries(self, instance, name):
        return [f"{self._state(instance, name)}.entries();"]

    def step_mutate(self, instance, name, where, code):
        spec = SPECS[name]
        chosen = self.facts.get(self._at) if self._at != self.failing else self._fact(self.model, self.cx.steps[
            self._at])
        if chosen == ():
            return ["// the model's state holds no such element: the step changes nothing"]
        value = value_of("int", max(code, 0))
        target = _literal(spec.key_type if spec.broadcast else spec.kind, chosen)
        return [f"Job.appendTo({self._state(instance, name)}, {target}, {value});  // changed in place, as user "
                f"code may change what the state hands out"]

    def step_open(self, parallelism):
        return [f"op = Job.open({parallelism});  // {parallelism} instance(s), each with the ten states registered"]

    def _needs_compression(self, compressed) -> list[str]:
        if not self._compressed(compressed):
            return []
        return ["assumeTrue(Job.compressionAvailable(), \"operator-state compression is new in 1.18.0: the program "
                "does not apply to this release\");"]

    def step_checkpoint(self, cid, compressed, target):
        call = f"op.checkpoint({cid}, {'true' if self._compressed(compressed) else 'false'})"
        if self.facts.get(self._at, True):
            return [*self._needs_compression(compressed),
                    f"OperatorStateHandle[] h{cid} = {call};  // every instance; asynchronous parts on the task thread"]
        return [*self._needs_compression(compressed),
                "try {  // the model: a null its serializers cannot write: the checkpoint fails",
                f"    {call};", "} catch (Exception unwritable) {", "    // as it must", "}"]

    def step_restore(self, cid, parallelism):
        if not self.facts.get(self._at, True):
            return [f"// c{cid} was not written: nothing to restore"]
        return [f"Job.restore(h{cid}, {parallelism}, \"\", null).dispose();"]

    def step_recover(self, cid, parallelism, reregister):
        if not self.facts.get(self._at, True):
            return [f"// c{cid} was not written: the job goes on as it was"]
        return [f"Job recovered{self._at} = Job.restore(h{cid}, {parallelism}, {java_string(reregister)}, null);",
                "op.dispose();", f"op = recovered{self._at};"]

    # ------------------------------------------------------------ failing checks

    def _step(self):
        return self.cx.steps[self.failing]

    def _message(self, code: str) -> str:
        return java_string(f"{code}: {self.operations.render(self._step())}")

    def _guarded(self, lines: list[str]) -> list[str]:
        """The step's Java, in a try block failing the test on an exception if the failure is the crash code."""
        if self.cx.failure.code == self.crash_code:
            return self.no_exception(self.crash_code, lines, self.operations.render(self._step()))
        return lines

    def _instance(self, instance) -> int:
        return instance % len(self.model.backends)

    def _write_parts(self) -> tuple:
        """The failing write step: (instance, state, the model's operation, the Java call, its arguments)."""
        step = self._step()
        instance, name, *rest = step.args
        if step.op in ("add_all", "update"):
            call, args = self._list_of({"add_all": "addAll"}.get(step.op, step.op), instance, name, *rest)
        else:
            call, args = getattr(self, f"_{step.op}")(instance, name, *rest)
        return instance, name, step.op, call, args

    def _raises(self, instance, name, op, call, args) -> bool:
        raises, _ = copy.deepcopy(self.model.model).call(self._instance(instance), name, op, *args)
        return raises

    def _write_check(self, *_):
        instance, name, op, call, args = parts = self._write_parts()
        if self.cx.failure.code == self.crash_code:
            return self._guarded([f"{self._state(instance, name)}.{call};"])
        raises = self._raises(*parts)
        message = java_string(f"O2: {self.operations.render(self._step())} (the model: "
                              f"{'raises' if raises else 'returns'})")
        return ["boolean raised = false;", "try {", f"    {self._state(instance, name)}.{call};",
                "} catch (Exception e) {", "    raised = true;", "}",
                f"assertEquals({'true' if raises else 'false'}, raised, {message});"]

    fails_add = fails_add_all = fails_update = fails_put = fails_put_all = fails_remove = _write_check

    def fails_clear(self, instance, name):
        return self._guarded(self.step_clear(instance, name))

    def fails_mutate(self, instance, name, where, code):
        return self._guarded(self.step_mutate(instance, name, where, code))

    def _want(self):
        step = self._step()
        instance, name, *rest = step.args
        spec = SPECS[name]
        model_op = {"lookup": "get"}.get(step.op, step.op)
        args = [value_of(spec.key_type, k) for k in rest]
        return self.model.model.read(self._instance(instance), name, model_op, *args)

    def _read(self, call: str):
        step = self._step()
        instance, name = step.args[:2]
        show = "showEntries" if step.op == "entries" else "show"
        return self._guarded([f"assertEquals({java_string(java_text(self._want()))}, "
                              f"Job.{show}({self._state(instance, name)}.{call}), {self._message('O1')});"])

    def fails_get(self, instance, name):
        return self._read("get()")

    def fails_lookup(self, instance, name, key):
        return self._read(f"get({self._key(name, key)})")

    def fails_contains(self, instance, name, key):
        return self._read(f"contains({self._key(name, key)})")

    def fails_entries(self, instance, name):
        return self._read("entries()")

    def fails_open(self, parallelism):
        return self._guarded(self.step_open(parallelism))

    def _restore_check(self, cid, parallelism, reregister, frozen, old) -> list[str]:
        """Restore ``h<cid>`` at ``parallelism`` and compare with the model frozen at it (O3, O4; O6)."""
        code = "O3" if parallelism == old else "O4"
        expect = self.model.model.restore_expectation(frozen, parallelism)
        # One literal per line, joined in Java: javac reads a \\u000a escape as a line break, even in a literal.
        want = [f"        {java_string(line)}," for line in expectation_lines(expect)]
        want[-1] = want[-1][:-1] + "),"
        refused = java_string(f"O6: {self.operations.render(self._step())}: state {reregister!r} was registered "
                              f"again with an incompatible serializer and the backend accepted it") \
            if reregister else "null"
        return [f"Job restored = null;",
                "try {",
                f"    restored = Job.restore(h{cid}, {parallelism}, {java_string(reregister)}, {refused});",
                "} catch (Exception e) {",
                f"    fail({java_string(f'{code}: restoring c{cid} at parallelism {parallelism} raised ')} + e, e);",
                "}",
                "assertEquals(String.join(\"\\n\",", *want,
                f"        restored.view({'true' if expect.split_exact is not None else 'false'}), "
                f"{self._message(code)});"]

    def fails_checkpoint(self, cid, compressed, target):
        frozen = self.model.model.freeze()
        call = f"op.checkpoint({cid}, {'true' if self._compressed(compressed) else 'false'})"
        if not self.model.model.writable(frozen):
            return [*self._needs_compression(compressed), "boolean written = true;", "try {", f"    {call};",
                    "} catch (Exception unwritable) {", "    written = false;", "}",
                    f"assertFalse(written, {self._message('O3')} + \": written, but it holds a null its serializers "
                    f"cannot write\");"]
        taken = self._guarded([f"h{cid} = {call};"])
        return [*self._needs_compression(compressed), f"OperatorStateHandle[] h{cid} = null;", *taken,
                *self._restore_check(cid, len(self.model.backends), "", frozen, len(self.model.backends))]

    def _kept(self, cid):
        if cid not in self.model.handles:
            raise JUnitUnsupported(f"{self.file_name}: the failing step restores c{cid}, which the model did not "
                                   f"keep: nothing to check")
        return self.model.frozen[cid]

    def fails_restore(self, cid, parallelism):
        frozen, _, old = self._kept(cid)
        return self._restore_check(cid, parallelism, "", frozen, old)

    def fails_recover(self, cid, parallelism, reregister):
        frozen, _, old = self._kept(cid)
        return self._restore_check(cid, parallelism, reregister, frozen, old)

    def expected(self) -> str:
        step = self._step()
        if step.op in ("get", "lookup", "contains", "entries"):
            return f"{self.operations.render(step)} answers {java_text(self._want())}"
        if step.op == "checkpoint" and not self.model.model.writable(self.model.model.freeze()):
            return "the checkpoint fails: the job holds a null its serializers cannot write"
        if step.op in ("checkpoint", "restore", "recover"):
            return "each instance restored holds what the job held at the checkpoint's synchronous part"
        if step.op in _WRITES and self.cx.failure.code != self.crash_code:
            return f"{self.operations.render(step)} {'raises' if self._raises(*self._write_parts()) else 'returns'}"
        return ""

    def nested(self) -> str:
        specs = ",\n".join(f"        {{{java_string(s.name)}, {java_string(s.mode)}, {java_string(s.kind)}, "
                           f"{java_string(s.key_type) if s.key_type else 'null'}}}" for s in STATES)
        return _NESTED.replace("@@STATES@@", specs)


_NESTED = '''
/** Flink's DefaultOperatorStateBackend, one per parallel instance, with cowcheck's operator machine's ten states. */
static final class Job {
    /** Per state: name, distribution mode, value (element) type, key type (broadcast states). */
    static final String[][] STATES = {
@@STATES@@
    };

    final List<DefaultOperatorStateBackend> backends = new ArrayList<>();
    final List<Map<String, Object>> states = new ArrayList<>();

    static Job open(int parallelism) throws Exception {
        Job job = new Job();
        for (int i = 0; i < parallelism; i++) {
            job.add(Collections.emptyList());
        }
        return job;
    }

    /** One more instance, restored from handles; every state registered as initializeState does. */
    void add(Collection<OperatorStateHandle> handles) throws Exception {
        DefaultOperatorStateBackend backend = build(handles);
        Map<String, Object> registered = new HashMap<>();
        for (String[] spec : STATES) {
            registered.put(spec[0], register(backend, spec, false));
        }
        backends.add(backend);
        states.add(registered);
    }

    static DefaultOperatorStateBackend build(Collection<OperatorStateHandle> handles) throws Exception {
        return new DefaultOperatorStateBackendBuilder(Job.class.getClassLoader(), new ExecutionConfig(), true,
                handles, new CloseableRegistry()).build();
    }

    /** A state's descriptor registered; incompatible: its element (or key) serializer one no release migrates from. */
    static Object register(DefaultOperatorStateBackend backend, String[] spec, boolean incompatible) throws Exception {
        if (spec[1].equals("BROADCAST")) {
            return backend.getBroadcastState(new MapStateDescriptor<>(spec[0], serializer(spec[3], incompatible),
                    serializer(spec[2], false)));
        }
        ListStateDescriptor<Object> descriptor = new ListStateDescriptor<>(spec[0], serializer(spec[2], incompatible));
        return spec[1].equals("UNION") ? backend.getUnionListState(descriptor) : backend.getListState(descriptor);
    }

    @SuppressWarnings("unchecked")
    static TypeSerializer<Object> serializer(String kind, boolean incompatible) {
        TypeSerializer<?> s;
        switch (kind) {
            case "int": s = incompatible ? LongSerializer.INSTANCE : IntSerializer.INSTANCE; break;
            case "long": s = incompatible ? IntSerializer.INSTANCE : LongSerializer.INSTANCE; break;
            case "string": s = incompatible ? IntSerializer.INSTANCE : StringSerializer.INSTANCE; break;
            default: s = incompatible ? new ListSerializer<>(LongSerializer.INSTANCE)
                    : new ListSerializer<>(IntSerializer.INSTANCE); break;
        }
        return (TypeSerializer<Object>) s;
    }

    /** The instance of the moment: a step's instance modulo the job's parallelism. */
    private Map<String, Object> at(int instance) {
        return states.get(instance % states.size());
    }

    @SuppressWarnings("unchecked")
    ListState<Object> list(int instance, String name) {
        return (ListState<Object>) at(instance).get(name);
    }

    @SuppressWarnings("unchecked")
    BroadcastState<Object, Object> broadcast(int instance, String name) {
        return (BroadcastState<Object, Object>) at(instance).get(name);
    }

    void clear(int instance, String name) {
        Object state = at(instance).get(name);
        if (state instanceof BroadcastState) {
            ((BroadcastState<?, ?>) state).clear();
        } else {
            ((ListState<?>) state).clear();
        }
    }

    void dispose() {
        for (DefaultOperatorStateBackend backend : backends) {
            backend.dispose();
        }
    }

    /** Every instance's synchronous part, then every asynchronous part on the task thread: the handles
     *  (null: an empty snapshot). */
    OperatorStateHandle[] checkpoint(long id, boolean compressed) throws Exception {
        List<RunnableFuture<SnapshotResult<OperatorStateHandle>>> futures = new ArrayList<>();
        for (DefaultOperatorStateBackend backend : backends) {
            MemCheckpointStreamFactory streams = new MemCheckpointStreamFactory(5 * 1024 * 1024);
            CheckpointOptions options = CheckpointOptions.forCheckpointWithDefaultLocation();
            futures.add(compressed ? compressedRunner(backend).snapshot(id, 0L, streams, options)
                    : backend.snapshot(id, 0L, streams, options));
        }
        OperatorStateHandle[] handles = new OperatorStateHandle[futures.size()];
        for (int i = 0; i < handles.length; i++) {
            futures.get(i).run();
            handles[i] = futures.get(i).get().getJobManagerOwnedSnapshot();
        }
        return handles;
    }

    /** Operator-state compression (1.18.0 on): DefaultOperatorStateBackendSnapshotStrategy has a decorator argument. */
    static boolean compressionAvailable() throws Exception {
        return strategyConstructor() != null;
    }

    private static Constructor<?> strategyConstructor() throws Exception {
        Class<?> strategy = Class.forName("org.apache.flink.runtime.state.DefaultOperatorStateBackendSnapshotStrategy");
        for (Constructor<?> c : strategy.getDeclaredConstructors()) {
            if (c.getParameterCount() == 4) {
                return c;
            }
        }
        return null;
    }

    /** A runner over the backend's own states whose strategy has the snappy decorator, as a job with snapshot
     *  compression on builds it (the backend's builder takes no decorator: reflection). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static SnapshotStrategyRunner<OperatorStateHandle, ?> compressedRunner(DefaultOperatorStateBackend backend)
            throws Exception {
        Constructor<?> constructor = strategyConstructor();
        constructor.setAccessible(true);
        Object strategy = constructor.newInstance(Job.class.getClassLoader(),
                field(backend, "registeredOperatorStates"),
                field(backend, "registeredBroadcastStates"), SnappyStreamCompressionDecorator.INSTANCE);
        return new SnapshotStrategyRunner("cowcheck compressed operator state", (SnapshotStrategy) strategy,
                new CloseableRegistry(), SnapshotExecutionType.ASYNCHRONOUS);
    }

    private static Object field(DefaultOperatorStateBackend backend, String name) throws Exception {
        Field f = DefaultOperatorStateBackend.class.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(backend);
    }

    /**
     * The job restored from a checkpoint's handles at a parallelism (RoundRobinOperatorStateRepartitioner).
     * reregister: a state each instance first registers with an incompatible serializer, which must fail
     * (refused: the test's failure if it does not; then the job restarts and the instance is restored again).
     */
    static Job restore(OperatorStateHandle[] handles, int parallelism, String reregister, String refused)
            throws Exception {
        List<List<OperatorStateHandle>> previous = new ArrayList<>();
        for (OperatorStateHandle handle : handles) {
            previous.add(handle == null ? new ArrayList<>() : new ArrayList<>(Collections.singletonList(handle)));
        }
        List<List<OperatorStateHandle>> parts = RoundRobinOperatorStateRepartitioner.INSTANCE.repartitionState(
                previous, handles.length, parallelism);
        Job job = new Job();
        for (int i = 0; i < parallelism; i++) {
            if (!reregister.isEmpty()) {
                DefaultOperatorStateBackend backend = build(parts.get(i));
                boolean accepted = true;
                try {
                    register(backend, spec(reregister), true);
                } catch (Exception expected) {  // StateMigrationException
                    accepted = false;
                }
                backend.dispose();
                if (accepted && refused != null) {
                    fail(refused);
                }
            }
            job.add(parts.get(i));
        }
        return job;
    }

    private static String[] spec(String name) {
        for (String[] spec : STATES) {
            if (spec[0].equals(name)) {
                return spec;
            }
        }
        throw new IllegalArgumentException(name);
    }

    /** What a restored job holds, as cowcheck compares it: a line per instance and state (split lists in order
     *  when exact, else their sizes and elements over all instances; union lists sorted; broadcast maps). */
    String view(boolean exact) throws Exception {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < states.size(); i++) {
            for (String[] spec : STATES) {
                Object state = states.get(i).get(spec[0]);
                if (spec[1].equals("BROADCAST")) {
                    lines.add(i + " " + spec[0] + " " + showEntries(((BroadcastState<?, ?>) state).entries()));
                } else if (spec[1].equals("UNION")) {
                    lines.add(i + " " + spec[0] + " " + sorted(((ListState<?>) state).get()));
                } else if (exact) {
                    lines.add(i + " " + spec[0] + " " + show(((ListState<?>) state).get()));
                }
            }
        }
        if (!exact) {
            for (String[] spec : STATES) {
                if (!spec[1].equals("SPLIT_DISTRIBUTE")) {
                    continue;
                }
                List<Object> all = new ArrayList<>();
                List<Integer> sizes = new ArrayList<>();
                for (Map<String, Object> instance : states) {
                    int size = 0;
                    Iterable<?> elements = ((ListState<?>) instance.get(spec[0])).get();
                    for (Object element : elements == null ? Collections.emptyList() : elements) {
                        all.add(element);
                        size++;
                    }
                    sizes.add(size);
                }
                Collections.sort(sizes);
                lines.add(spec[0] + " sizes " + sizes + " elements " + sorted(all));
            }
        }
        return String.join("\\n", lines);
    }

    /** An answer as cowcheck prints it: Java's toString forms, a map's pairs sorted by their keys' text. */
    @SuppressWarnings("unchecked")
    static String show(Object answer) {
        if (answer instanceof Map) {
            return showEntries(((Map<Object, Object>) answer).entrySet());
        }
        if (answer instanceof List) {
            List<String> items = new ArrayList<>();
            for (Object item : (List<Object>) answer) {
                items.add(show(item));
            }
            return "[" + String.join(", ", items) + "]";
        }
        return String.valueOf(answer);
    }

    /** A broadcast state's entries as a map: its pairs sorted by their keys' text. */
    static String showEntries(Iterable<? extends Map.Entry<?, ?>> entries) {
        List<String> items = new ArrayList<>();
        for (Map.Entry<?, ?> e : entries) {
            items.add(show(e.getKey()) + "=" + show(e.getValue()));
        }
        Collections.sort(items);
        return "{" + String.join(", ", items) + "}";
    }

    /** A list state's answer as cowcheck reads it: none is the empty list. */
    static String show(Iterable<?> elements) {
        List<String> items = new ArrayList<>();
        if (elements != null) {
            for (Object element : elements) {
                items.add(show(element));
            }
        }
        return "[" + String.join(", ", items) + "]";
    }

    /** A multiset of elements: each one's text, sorted. */
    static String sorted(Iterable<?> elements) {
        List<String> items = new ArrayList<>();
        if (elements != null) {
            for (Object element : elements) {
                items.add(show(element));
            }
        }
        Collections.sort(items);
        return "[" + String.join(", ", items) + "]";
    }

    /** A list element found by value, changed in place through what the state handed out: appended to. */
    @SuppressWarnings("unchecked")
    static void appendTo(ListState<Object> state, List<Integer> element, int value) throws Exception {
        for (Object held : state.get()) {
            if (element.equals(held)) {
                ((List<Object>) held).add(value);
                return;
            }
        }
        fail("O1: the state holds no element " + element + "; the model's holds it");
    }

    /** A broadcast value changed in place through what the state handed out: appended to. */
    @SuppressWarnings("unchecked")
    static void appendTo(BroadcastState<Object, Object> state, Object key, int value) throws Exception {
        Object held = state.get(key);
        if (held == null) {
            fail("O1: the state handed out null for key " + key + "; the model's holds a value");
        }
        ((List<Object>) held).add(value);
    }

    static List<Integer> ints(Integer... values) {
        return new ArrayList<>(Arrays.asList(values));
    }

    static List<Object> values(Object... values) {
        return new ArrayList<>(Arrays.asList(values));
    }

    static Map<Object, Object> entries(Object... keysAndValues) {
        Map<Object, Object> out = new HashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            out.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        return out;
    }
}
'''
