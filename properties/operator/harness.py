"""Apply operator programs to operator state backends and their model; check every read, checkpoint and restore.

The implementation is a factory of operator state backends (``factory()``,
the API of :class:`cowcheck.reference.operator.OperatorStateBackends`):
``create_operator_state_backend(handles=())`` and ``repartition(previous,
old_parallelism, new_parallelism)``; optionally ``release`` (the Flink release
whose null handling it follows; default 2.3.0). The harness opens a job of
instances, registers the states of :data:`~cowcheck.operator.ops.STATES` on
each, and applies each step to an instance and to
:class:`~cowcheck.model.operator_model.OperatorModel`.

Codes (``Failure.code``):

- O1 a read (a list state's ``get``, a broadcast state's ``get``, ``contains``,
  ``entries``) differs from the model;
- O2 a call with a None (or a list holding one) raised where the release
  accepts it, or returned where the release rejects it;
- O3 a checkpoint whose asynchronous parts ran on the task thread, restored at
  its own parallelism, differs from the model frozen at its synchronous part
  (each instance's lists in order, union lists as multisets, broadcast maps),
  or a checkpoint the model can write failed to be written, or one it cannot
  write (a None its serializer cannot write) was;
- O4 the same checkpoint restored at another parallelism (scale out or in):
  the split lists' elements over all instances, their sizes (round-robin), a
  union list on every instance, broadcast state ``i % old`` on instance ``i``;
- O3, O4 and O5 hold savepoints as they hold checkpoints (``savepoint``,
  ``savepoint_async``: the backend's ``snapshot(..., savepoint=True)``);
- O5 O3 or O4 for a checkpoint whose asynchronous parts ran on threads of their
  own while the task thread went on with the next steps;
- O6 re-registration after a restore: a state registered again with an
  incompatible serializer was accepted (Flink: StateMigrationException; the
  job then restarts: the instance is restored again and registers its own);
- O7 the backend raised where the model expects an answer (crash code).

What a rejected call leaves behind is a *finding* (reported, never a failure,
unless it differs from the release's behaviour: then O1 at the next read).

>>> from cowcheck.reference.operator import OperatorStateBackends
>>> h = OperatorHarness(OperatorStateBackends())
>>> for step in [Step("open", (2,)), Step("add", (1, "split_int", 4)), Step("checkpoint", (0, True, "memory")),
...              Step("restore", (0, 3))]:
...     h.apply(step)
>>> h.coverage["rescale-out"], h.coverage["compression-on"]
(1, 1)
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import weakref
from collections import Counter
from typing import Optional

import attrs

from cowcheck.core.errors import UsageError
from cowcheck.core.failures import CRASH, DIVERGENCE, CheckFailure
from cowcheck.core.harness import HarnessBase
from cowcheck.core.program import Step
from cowcheck.core.streams import YieldingStreamFactory, yield_pause
from cowcheck.model.operator_model import OperatorModel, canonical
from cowcheck.operator.ops import (ASYNC, CHECKPOINTS, OPERATOR_OPS, SPECS, STATES, descriptor_of, entries_of,
                                   incompatible_descriptor, value_of, values_of)
from cowcheck.reference.checkpoint import CheckpointStreamFactory

__all__ = ["OperatorHarness", "OperatorMachineConfig", "OPERATOR_SCENARIOS", "OPERATOR_FINDINGS"]

OPERATOR_SCENARIOS: dict[str, str] = {
    "list-state": "a SPLIT_DISTRIBUTE list state read or written",
    "union-state": "a UNION list state read or written",
    "broadcast-state": "a BROADCAST state read or written",
    "mutable-element-changed": "an element (a list) changed in place through what the state handed out",
    "null-argument": "a call given a None, or a list holding one",
    "null-rejected": "a call with a None the release rejects (it raised)",
    "compression-on": "a checkpoint with snapshot compression (snappy)",
    "compression-off": "a checkpoint without snapshot compression",
    "checkpoint-file": "a checkpoint to file streams",
    "savepoint-taken": "a savepoint (the snapshot with savepoint options) taken and restored",
    "checkpoint-unwritable": "a checkpoint of state its serializers cannot write (it failed, as it must)",
    "async-part-on-thread": "a checkpoint whose asynchronous parts ran on threads of their own",
    "async-racing": "a write of the task thread while an asynchronous part was still running",
    "restore-same-parallelism": "a checkpoint restored at its own parallelism",
    "rescale-out": "a checkpoint restored at a higher parallelism",
    "rescale-in": "a checkpoint restored at a lower parallelism",
    "recover-and-continue": "a job recovered from a checkpoint and changed further",
    "checkpoint-after-restore": "a checkpoint of a recovered job",
    "reregister-compatible": "a restored state registered again with the same serializer",
    "reregister-incompatible": "a restored state registered again with an incompatible serializer (it failed)",
}
OPERATOR_FINDINGS: dict[str, str] = {
    "rejected-call-changed-state": "a call that raised (a None the release rejects) had changed the state first "
                                   "(update clears before it checks; add_all adds the values before the None): "
                                   "the javadoc promises nothing either way",
}

_WRITES = frozenset({"add", "add_all", "update", "clear", "put", "put_all", "remove", "mutate"})
_AT_INSTANCE = frozenset(op.name for op in OPERATOR_OPS if op.args[:1] == ("instance",))


@attrs.frozen
class OperatorMachineConfig:
    """What the machine generates: where a checkpoint's asynchronous parts may run (``thread``: on the task
    thread or on threads of their own; ``inline``: always on the task thread), whether checkpoints may be
    compressed (``compression``: False for a release without operator-state compression, before 1.18.0)."""

    async_part: str = attrs.field(default="thread", validator=attrs.validators.in_(("thread", "inline")))
    compression: bool = True
    white_box: Optional[bool] = None


def _as_dict(entries) -> dict:
    return {k: v for k, v in entries} if entries is not None else {}


class OperatorHarness(HarnessBase):
    """See the module docstring. ``impl``: the factory's backends builder (``factory()``)."""

    operations = OPERATOR_OPS
    crash_code = "O7"

    def __init__(self, impl, async_part: str = "thread", compression: bool = True,
                 white_box: Optional[bool] = None, observe: bool = False) -> None:
        super().__init__()
        self.impl = impl
        self.async_part = async_part
        self.compression = compression
        self.observed: Optional[list] = [] if observe else None
        self.release = getattr(impl, "release", "2.3.0")
        self.backends: list = []
        self.states: list = []  # per instance: name -> the state object
        self.model: Optional[OperatorModel] = None
        self.frozen: dict = {}  # cid -> (the model frozen at the synchronous part, writable?)
        self.futures: dict = {}  # cid -> [futures] of a running checkpoint
        self.handles: dict = {}  # cid -> per instance, its handle (None: an empty snapshot)
        self.threaded: set = set()
        self.random = random.Random(0)
        self._directory: Optional[str] = None
        self._cleanup: Optional[weakref.finalize] = None
        self.recovered = False

    # ------------------------------------------------------------ programs

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        """``open`` first and only there; checkpoint ids started once; ``join`` names a running one, restores a
        started one. (A step's instance is taken modulo the job's parallelism of the moment: a recovery from a
        checkpoint that could not be written leaves it as it was.)"""
        if not steps:
            return True
        if steps[0].op != "open":
            return False
        started, running = set(), set()
        for step in steps[1:]:
            op, args = step.op, step.args
            if op == "open":
                return False
            if op in CHECKPOINTS:
                if args[0] in started:
                    return False
                started.add(args[0])
                if op in ASYNC:
                    running.add(args[0])
            elif op == "join":
                if args[0] not in running:
                    return False
                running.discard(args[0])
            elif op in ("restore", "recover"):
                if args[0] not in started:
                    return False
                running.discard(args[0])
                if op == "recover":
                    running.clear()
        return True

    @classmethod
    def normalise(cls, steps: list[Step]) -> list[Step]:
        """Checkpoint ids renumbered 0, 1, 2... in order of appearance."""
        ids: dict = {}
        out = []
        for step in steps:
            if step.op in CHECKPOINTS or step.op in ("join", "restore", "recover"):
                step = Step(step.op, (ids.setdefault(step.args[0], len(ids)), *step.args[1:]))
            out.append(step)
        return out

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
        else:
            _finish(self.futures, None)

    # ------------------------------------------------------------ the loop

    def _apply(self, step: Step) -> None:
        if self.futures:
            running = [f for fs in self.futures.values() for f in fs if not self._call(step, lambda f=f: f.done)]
            if running:
                time.sleep(yield_pause(self.random))
                if step.op in _WRITES:
                    self.coverage["async-racing"] += 1
        if step.op != "open" and self.model is None:
            self._fail(CRASH, "program", f"{self._render(step)}: no job open (a program starts with open)")
        if step.op in _AT_INSTANCE:  # the instance of the moment: modulo the job's parallelism
            getattr(self, "_op_" + step.op)(step, step.args[0] % len(self.backends), *step.args[1:])
            return
        super()._apply(step)

    def _observe(self, answer) -> None:
        if self.observed is not None:
            self.observed.append((len(self.steps) - 1, answer))

    def _expect(self, step: Step, code: str, want, got, what: str = "") -> None:
        if want != got:
            self._fail(DIVERGENCE, code, f"{self._render(step)}{what}: model {want!r}, backend {got!r}", want, got)

    # ------------------------------------------------------------ opening

    def _op_open(self, step, parallelism):
        if self.model is not None:
            self._fail(CRASH, "program", f"{self._render(step)}: the job is already open")
        self.model = OperatorModel(STATES, parallelism, self.release)
        self.backends = [self._call(step, self.impl.create_operator_state_backend, []) for _ in range(parallelism)]
        self.states = [self._register(step, b) for b in self.backends]

    def _register(self, step, backend) -> dict:
        """Every state registered as ``initializeState`` does."""
        return {spec.name: self._call(step, self._getter(backend, spec), descriptor_of(spec)) for spec in STATES}

    def _refuses(self, step, backend, name: str) -> None:
        """Registering restored state ``name`` with an incompatible serializer must fail (O6)."""
        spec = SPECS[name]
        try:
            self._call(step, self._getter(backend, spec), incompatible_descriptor(spec))
        except CheckFailure as exc:
            if exc.failure.kind != CRASH:
                raise
            self.failure = None
            self.coverage["reregister-incompatible"] += 1
            return
        self._fail(DIVERGENCE, "O6", f"{self._render(step)}: state {name!r} was registered again with an "
                                     f"incompatible serializer and the backend accepted it (Flink: "
                                     f"StateMigrationException)", "StateMigrationException", "accepted")

    @staticmethod
    def _getter(backend, spec):
        if spec.broadcast:
            return backend.get_broadcast_state
        return backend.get_list_state if spec.mode == "SPLIT_DISTRIBUTE" else backend.get_union_list_state

    # ------------------------------------------------------------ state-level steps

    def _state(self, step, instance, name):
        spec = SPECS[name]
        self.coverage["broadcast-state" if spec.broadcast else
                      "list-state" if spec.mode == "SPLIT_DISTRIBUTE" else "union-state"] += 1
        return self.states[instance][name]

    def _write(self, step, instance, name, method, model_op, *args):
        """A write through ``method`` of the state, ``args`` given to it and to the model; its outcome (raised or
        not) against the release's (O2)."""
        state = self._state(step, instance, name)
        nulls = any(_holds_none(a) for a in args)
        if nulls:
            self.coverage["null-argument"] += 1
        read = "entries" if SPECS[name].broadcast else "get"
        before = self.model.read(instance, name, read)
        raises, _ = self.model.call(instance, name, model_op, *args)
        try:
            self._call(step, getattr(state, method), *args)
        except CheckFailure as exc:
            if exc.failure.kind == CRASH and raises:
                self.failure = None
                self.coverage["null-rejected"] += 1
                if self.model.read(instance, name, read) != before:
                    self.findings["rejected-call-changed-state"] += 1
                return
            if exc.failure.kind == CRASH and nulls:
                self._fail(DIVERGENCE, "O2", f"{self._render(step)}: raised {exc.failure.actual}; Flink "
                                             f"{self.release} accepts it", "accepted", exc.failure.actual)
            raise
        if raises:
            self._fail(DIVERGENCE, "O2", f"{self._render(step)}: returned; Flink {self.release} rejects it "
                                         f"(NullPointerException)", "raises", "returned")

    def _op_add(self, step, instance, name, code):
        self._write(step, instance, name, "add", "add", value_of(SPECS[name].kind, code))

    def _op_add_all(self, step, instance, name, codes):
        self._write(step, instance, name, "add_all", "add_all", values_of(SPECS[name].kind, codes))

    def _op_update(self, step, instance, name, codes):
        self._write(step, instance, name, "update", "update", values_of(SPECS[name].kind, codes))

    def _op_clear(self, step, instance, name):
        self._write(step, instance, name, "clear", "clear")

    def _op_put(self, step, instance, name, key, value):
        spec = SPECS[name]
        self._write(step, instance, name, "put", "put", value_of(spec.key_type, key), value_of(spec.kind, value))

    def _op_put_all(self, step, instance, name, pairs):
        self._write(step, instance, name, "put_all", "put_all", entries_of(SPECS[name], pairs))

    def _op_remove(self, step, instance, name, key):
        self._write(step, instance, name, "remove", "remove", value_of(SPECS[name].key_type, key))

    def _read(self, step, instance, name, method, model_op, *args, shape=lambda got: got):
        state = self._state(step, instance, name)
        got = self._call(step, lambda: shape(getattr(state, method)(*args)))
        if self.recovered and SPECS[name].mode == "SPLIT_DISTRIBUTE":
            self._observe(len(got))  # which elements a recovered instance got is the repartitioner's choice
        else:
            self._observe(_comparable(got, SPECS[name].mode == "UNION"))
        self._expect(step, "O1", self.model.read(instance, name, model_op, *args), got)

    def _op_get(self, step, instance, name):
        self._read(step, instance, name, "get", "get", shape=_list_answer)

    def _op_lookup(self, step, instance, name, key):
        k = value_of(SPECS[name].key_type, key)
        self._read(step, instance, name, "get", "get", k, shape=_plain)

    def _op_contains(self, step, instance, name, key):
        self._read(step, instance, name, "contains", "contains", value_of(SPECS[name].key_type, key), shape=bool)

    def _op_entries(self, step, instance, name):
        self._read(step, instance, name, "entries", "entries", shape=lambda got: _plain(_as_dict(got)))

    def _op_mutate(self, step, instance, name, where, code):
        """Change an element (a list state's ``where``-th in sorted order, if any) or a value (a broadcast
        state's key ``where``) in place through what the state hands out, as user code may."""
        spec = SPECS[name]
        value = value_of("int", max(code, 0))
        state = self._state(step, instance, name)
        if spec.broadcast:
            key = value_of(spec.key_type, where)
            current = self.model.read(instance, name, "get", key)
            if current is None:
                return
            target = self._call(step, state.get, key)
        else:
            current = [e for e in self.model.read(instance, name, "get") if e is not None]
            if not current:  # (a null element, stored by releases before 1.19.0, cannot be changed)
                return
            # The element by value (the where-th in sorted order), not by position: a recovered instance's
            # order is the implementation's choice. Equal elements are interchangeable: the first one.
            chosen = sorted(current, key=repr)[where % len(current)]
            where = self.model.read(instance, name, "get").index(chosen)
            elements = self._call(step, lambda: list(state.get()))
            index = next((i for i, e in enumerate(elements) if _plain(e) == chosen), None)
            if index is None:
                self._fail(DIVERGENCE, "O1", f"{self._render(step)}: the state holds no element {chosen!r}, the "
                                             f"model's holds it", chosen, _plain(elements))
            target = elements[index]
        if target is None:
            self._fail(DIVERGENCE, "O1", f"{self._render(step)}: the state handed out None, the model holds "
                                         f"{current!r}", current, None)
        self._call(step, target.append, value)
        self.model.call(instance, name, "mutate", where if not spec.broadcast else value_of(spec.key_type, where),
                        value)
        self.coverage["mutable-element-changed"] += 1

    # ------------------------------------------------------------ checkpoints

    def _streams(self, target: str):
        if target == "memory":
            return CheckpointStreamFactory()
        self.coverage["checkpoint-file"] += 1
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="cowcheck-operator-")
            self._cleanup = weakref.finalize(self, _finish, self.futures, self._directory)
        return CheckpointStreamFactory(self._directory, threshold=0)

    def _take(self, step, cid, compressed, target, seed=None, savepoint: bool = False) -> list:
        """The synchronous parts of every instance; the model frozen. A job the model cannot write may fail
        here (a list element None cannot be copied): then the checkpoint is over. A savepoint is the same
        snapshot with savepoint options (Flink's StreamOperatorStateHandler takes both through the backend's
        ``snapshot``), so it is held to the same frozen model."""
        if compressed and not self.compression:  # (a stored program replayed on a release without it)
            raise UsageError(f"{self._render(step)}: a compressed checkpoint, which this implementation does not "
                             f"take (Flink has operator-state compression from 1.18.0): the program cannot run on it")
        self.coverage["compression-on" if compressed else "compression-off"] += 1
        if savepoint:
            self.coverage["savepoint-taken"] += 1
        if self.recovered:
            self.coverage["checkpoint-after-restore"] += 1
        frozen = self.model.freeze()
        writable = self.model.writable(frozen)
        self.frozen[cid] = (frozen, writable, len(self.backends))
        futures = []
        for i, backend in enumerate(self.backends):
            streams = self._streams(target)
            if seed is not None and i == 0:  # one instance's streams yield (each yield costs its sleep)
                streams = YieldingStreamFactory(streams, seed)
            options = {"savepoint": True} if savepoint else {}  # (checkpoints: the API as it was before savepoints)
            future = self._attempt(step, cid, lambda b=backend, s=streams: b.snapshot(cid, s, compressed=compressed,
                                                                                      **options))
            if future is None:
                return []
            futures.append(future)
        return futures

    def _attempt(self, step, cid, call):
        """``call()`` into a checkpoint; a failure is the checkpoint's (expected when the model cannot write
        it: coverage; else O7), None then."""
        frozen, writable, _ = self.frozen[cid]
        try:
            return self._call(step, call)
        except CheckFailure as exc:
            if exc.failure.kind != CRASH or writable:
                raise
            self.failure = None
            self.coverage["checkpoint-unwritable"] += 1
            self.frozen.pop(cid)
            return None

    def _op_checkpoint(self, step, cid, compressed, target):
        futures = self._take(step, cid, compressed, target)
        self._complete(step, cid, futures, started=False)

    def _op_savepoint(self, step, cid, compressed, target):
        futures = self._take(step, cid, compressed, target, savepoint=True)
        self._complete(step, cid, futures, started=False)

    def _op_savepoint_async(self, step, cid, compressed, target, seed):
        self._op_checkpoint_async(step, cid, compressed, target, seed, savepoint=True)

    def _op_checkpoint_async(self, step, cid, compressed, target, seed, savepoint: bool = False):
        futures = self._take(step, cid, compressed, target, seed, savepoint)
        if self.async_part == "inline" or not futures:
            self._complete(step, cid, futures, started=False)
            return
        for future in futures:
            self._call(step, future.start)
        self.futures[cid] = futures
        self.threaded.add(cid)
        self.coverage["async-part-on-thread"] += 1
        self.random = random.Random(seed)

    def _complete(self, step, cid, futures, started: bool) -> None:
        """Each instance's asynchronous part run here (or waited for, if ``started``); then the restore checked."""
        if cid not in self.frozen:
            return
        handles = []
        for future in futures:
            got = self._attempt(step, cid, (lambda f=future: _wait(f)) if started else future.run)
            if cid not in self.frozen:
                return
            handles.append(got)
        if not self.frozen[cid][1]:
            self._fail(DIVERGENCE, self._code(cid, "O3"), f"{self._render(step)}: checkpoint c{cid} was written, "
                                                          f"but it holds a None its serializers cannot write",
                       "the checkpoint fails", "written")
        self.handles[cid] = handles
        self._check_restore(step, cid, len(handles))

    def _op_join(self, step, cid):
        futures = self.futures.pop(cid, None)
        if futures is not None:
            self._complete(step, cid, futures, started=True)

    def _code(self, cid, code: str) -> str:
        return "O5" if cid in self.threaded else code

    def _completed(self, step, cid) -> bool:
        self._op_join(step, cid)
        return cid in self.handles

    # ------------------------------------------------------------ restores

    def _restored(self, step, cid, parallelism: int, code: str, reregister: str = "") -> tuple[list, list]:
        """The job restored from ``cid`` at ``parallelism``: (backends, their states)."""
        handles = self.handles[cid]
        previous = [[h] if h is not None else [] for h in handles]
        parts = self._call(step, self.impl.repartition, previous, len(handles), parallelism)
        backends, states = [], []
        for i in range(parallelism):
            backend = self._build(step, cid, code, parts, i)
            if reregister:  # the job fails (StateMigrationException) and restarts: the instance restored again
                self._refuses(step, backend, reregister)
                self._dispose(step, [backend])
                backend = self._build(step, cid, code, parts, i)
            backends.append(backend)
            states.append(self._register(step, backend))
        return backends, states

    def _build(self, step, cid, code, parts, i):
        try:
            return self._call(step, self.impl.create_operator_state_backend, list(parts[i]))
        except CheckFailure as exc:
            if exc.failure.kind != CRASH:
                raise
            self._fail(DIVERGENCE, code, f"{self._render(step)}: restoring instance {i} of {len(parts)} from c{cid} "
                                         f"raised {exc.failure.actual}", "restored", exc.failure.actual)

    def _check_restore(self, step, cid, parallelism: int, reregister: str = ""):
        """Restore ``cid`` at ``parallelism`` and hold every instance to the model frozen at it."""
        frozen, _, old = self.frozen[cid]
        code = self._code(cid, "O3" if parallelism == old else "O4")
        self.coverage["restore-same-parallelism" if parallelism == old else
                      "rescale-out" if parallelism > old else "rescale-in"] += 1
        backends, states = self._restored(step, cid, parallelism, code, reregister)
        expect = self.model.restore_expectation(frozen, parallelism)
        read = []
        for i, instance in enumerate(states):
            got = {}
            for spec in STATES:
                state = instance[spec.name]
                got[spec.name] = self._call(step, lambda s=state, b=spec.broadcast: _plain(_as_dict(s.entries()))
                                            if b else _list_answer(s.get()))
            read.append(got)
        self._observe_restored(read)
        self._compare(step, cid, code, expect, read)
        return backends, states, read

    def _observe_restored(self, read: list) -> None:
        """What parity compares of a restore: each instance's union lists (as multisets) and maps; its split
        lists too until the job has recovered once (then the order of a recovered instance's elements is the
        order of the handles it read, which Flink takes from random stream names), else their sizes and the
        multiset over all instances."""
        if self.observed is None:
            return
        for instance in read:
            self._observe(sorted((k, _comparable(v, True)) for k, v in instance.items()
                                 if SPECS[k].broadcast or SPECS[k].mode == "UNION" or not self.recovered))
        if self.recovered:
            for name in (k for k in read[0] if not SPECS[k].broadcast and SPECS[k].mode != "UNION"):
                self._observe((name, sorted(len(i[name]) for i in read),
                               sorted(repr(v) for i in read for v in i[name])))

    def _compare(self, step, cid, code, expect, read) -> None:
        where = f" (c{cid} restored at parallelism {expect.new_parallelism}, written at {expect.old_parallelism})"
        for name, total in expect.split_total.items():
            got = Counter(canonical(v) for instance in read for v in instance[name])
            if got != total:
                self._fail(DIVERGENCE, code, f"{self._render(step)}{where}: list state {name!r} holds "
                                             f"{_diff(total, got)} over all instances", _counts(total), _counts(got))
            sizes = sorted(len(instance[name]) for instance in read)
            if expect.split_exact is None and sizes != expect.split_sizes[name]:
                self._fail(DIVERGENCE, code, f"{self._render(step)}{where}: list state {name!r} split into sizes "
                                             f"{sizes}, round-robin gives {expect.split_sizes[name]}",
                           expect.split_sizes[name], sizes)
        for i, instance in enumerate(read):
            for name in expect.split_total:
                if expect.split_exact is not None and instance[name] != expect.split_exact[i][name]:
                    self._expect(step, code, expect.split_exact[i][name], instance[name],
                                 f"{where}: instance {i}, list state {name!r}")
            for name, total in expect.union.items():
                got = Counter(canonical(v) for v in instance[name])
                if got != total:
                    self._fail(DIVERGENCE, code, f"{self._render(step)}{where}: instance {i}, union state {name!r} "
                                                 f"holds {_diff(total, got)}", _counts(total), _counts(got))
            for name, want in expect.broadcast[i].items():
                self._expect(step, code, want, instance[name], f"{where}: instance {i}, broadcast state {name!r}")

    def _dispose(self, step, backends) -> None:
        for backend in backends:
            dispose = getattr(backend, "dispose", None)
            if callable(dispose):
                self._call(step, dispose)

    def _op_restore(self, step, cid, parallelism):
        if not self._completed(step, cid):
            return
        backends, _, _ = self._check_restore(step, cid, parallelism)
        self._dispose(step, backends)

    def _op_recover(self, step, cid, parallelism, reregister):
        for running in list(self.futures):
            self._op_join(step, running)
        if cid not in self.handles:
            return
        backends, states, read = self._check_restore(step, cid, parallelism, reregister)
        self.coverage["reregister-compatible"] += 1
        self._dispose(step, self.backends)
        self.backends, self.states = backends, states
        self.model.recover(read)
        self.recovered = True
        self.coverage["recover-and-continue"] += 1


def _holds_none(argument) -> bool:
    if argument is None:
        return True
    if isinstance(argument, list):
        return any(v is None for v in argument)
    if isinstance(argument, dict):
        return any(k is None or v is None for k, v in argument.items())
    return False


def _comparable(answer, any_order: bool):
    """An answer as parity compares it: maps by their items; lists in order, unless the order is the
    implementation's choice (union lists: the order of the handles)."""
    if isinstance(answer, dict):
        return sorted(map(repr, answer.items()))
    if isinstance(answer, list) and any_order:
        return sorted(map(repr, answer))
    return answer


def _plain(value):
    """Java or Python values as plain Python ones (lists of lists, dicts)."""
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return [_plain(v) for v in value]


def _list_answer(got) -> list:
    return [] if got is None else [_plain(v) for v in got]


def _counts(counter: Counter) -> list:
    return sorted(([repr(k), n] for k, n in counter.items()))


def _diff(want: Counter, got: Counter) -> str:
    missing, extra = want - got, got - want
    return f"{sum(missing.values())} elements too few ({_counts(missing)[:4]}) and {sum(extra.values())} too many " \
           f"({_counts(extra)[:4]})"


def _finish(futures: dict, directory: Optional[str]) -> None:
    for running in futures.values():
        for future in running:
            try:
                future.get(10.0)
            except Exception:
                pass
    futures.clear()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _wait(future):
    while not future.done:
        time.sleep(0.0005)
    return future.get()
