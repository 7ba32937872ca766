"""Apply backend programs to a keyed state backend and its model; check every read, key and restore.

The implementation is a *state backend* (``factory()``): an object with a
``clock`` (``advance(millis)``, starting at 0) that builds keyed backends
(``create_keyed_state_backend(key_serializer, max_parallelism,
key_group_range, state_handles=())``, the API of
:mod:`cowcheck.reference.keyed`). The harness opens one, registers the states
of :data:`~cowcheck.backend.ops.STATES` through their descriptors, and
applies each step to it and to :class:`~cowcheck.model.keyed_model.KeyedModel`.

Codes (``Failure.code``):

- K1 a read (``value``, ``get``, a map's ``get``/``contains``/``entries``)
  differs from the model: time-to-live applied, an expired value is never
  returned;
- K2 key iteration misses a key whose state shows something, lists one twice,
  or lists one that holds nothing any more (never written, or removed);
- K3 a checkpoint whose asynchronous part ran on the task thread, restored
  (its range or a sub-range), differs from the model's copy frozen at its
  synchronous part: what its states show, or the keys it lists (it must
  not list a key whose state had expired when the checkpoint was taken:
  cleanup in full snapshots);
- K4 a checkpoint restored into two key-group ranges, each checkpointed and
  merged back (rescaling), differs from the frozen copy;
- K5 K3 for a checkpoint whose asynchronous part ran on a thread of its own
  while the task thread went on with the next steps (the race copy-on-write
  exists for);
- K6 the backend raised where the model expects an answer (crash code);
- K7 a savepoint (canonical or native) restored differs from the frozen copy (savepoints.py);
- K8 an upgrade Flink accepts (a POJO's fields added or removed, TTL switched) does not restore the
  model's state migrated; K9 an incompatible one is not refused (upgrades.py);
- K10 a file snapshot is not where its size and threshold put it, or a stream's last (zero-length)
  read breaks a restore.

Checkpoint files go to a private temporary directory. While an asynchronous
part runs, each step of the task thread starts with a random yield (a
``random.Random`` seeded by the checkpoint's step), and the stream factory
asks the implementation to yield at random while it writes
(:class:`YieldingStreamFactory`).

>>> from cowcheck.reference.keyed import HashMapStateBackend
>>> h = BackendHarness(HashMapStateBackend())
>>> for step in [Step("open", ("int", 8)), Step("update", ("value_ttl", 0, 0, 7)), Step("advance", (10,)),
...              Step("value", ("value_ttl", 0, 0))]:
...     h.apply(step)
>>> h.coverage["ttl-expired-read"]
1
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import weakref
from typing import Optional

import attrs

from cowcheck.model.keyed_model import KeyedModel
from cowcheck.backend.ops import (BACKEND_OPS, CHECKPOINTS, KEYED, NAMESPACES, STATES, THREADED, descriptor_of,
                                  key_pool)
from cowcheck.backend.savepoints import SAVEPOINT_SCENARIOS, SnapshotFormSteps
from cowcheck.backend.upgrades import UPGRADE_SCENARIOS, UpgradeSteps
from cowcheck.backend.values import typed
from cowcheck.core.failures import CRASH, DIVERGENCE, CheckFailure
from cowcheck.core.harness import HarnessBase
from cowcheck.core.keys import FAMILIES, fresh
from cowcheck.core.program import Step
from cowcheck.core.streams import YieldingStreamFactory, yield_pause
from cowcheck.reference.checkpoint import CheckpointStreamFactory
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import IntSerializer
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["BackendHarness", "BackendMachineConfig", "YieldingStreamFactory", "BACKEND_SCENARIOS", "SPECS"]

SPECS = {s.name: s for s in STATES}

BACKEND_SCENARIOS: dict[str, str] = {
    "value-state": "a value state read or written",
    "list-state": "a list state read or written",
    "map-state": "a map state read or written",
    "reducing-state": "a reducing state read or written",
    "ttl-off": "a step on a state without time-to-live",
    "ttl-on-create-and-write": "a step on a state with TTL updated on create and write",
    "ttl-on-read-and-write": "a step on a state with TTL updated on read and write",
    "ttl-expired-read": "a read that found its value expired",
    "null-update": "a value state updated with null (removes it)",
    "key-iteration": "key iteration of a state in a namespace",
    "checkpoint-memory": "a checkpoint to memory streams",
    "checkpoint-file": "a checkpoint to file streams",
    "checkpoint-compressed": "a checkpoint with snapshot compression (snappy key groups, Flink's format)",
    "savepoint-compressed": "a savepoint (canonical or native) with snapshot compression",
    "checkpoint-drops-expired": "a checkpoint taken while some state had expired (cleanup in full snapshots)",
    "async-part-on-thread": "a checkpoint whose asynchronous part ran on a thread of its own",
    "async-part-racing-updates": "a write of the task thread while an asynchronous part was still running",
    "restore-same-range": "a checkpoint restored into its own key-group range",
    "restore-sub-range": "a checkpoint restored into a smaller key-group range",
    "restore-rescaled": "a checkpoint split into two ranges, checkpointed and merged back",
    "recover-and-continue": "state restored from a checkpoint and changed further",
    **SAVEPOINT_SCENARIOS,
    **UPGRADE_SCENARIOS,
}

_WRITES = frozenset({"update", "list_add", "list_update", "map_put", "map_remove", "reduce_add", "clear"})


@attrs.frozen
class BackendMachineConfig:
    """What the machine generates: how many keys per program, where a checkpoint's
    asynchronous part may run (``thread``: on the task thread or on a thread of its own;
    ``inline``: always on the task thread, so no step ever races it), and whether savepoints
    may be native (``native_savepoints``: Flink has them from 1.15; its implementation
    turns them off before), and whether time-to-live switched on or off across a restore is
    migrated (``ttl_migration``, Flink from 2.2) or refused as incompatible."""

    keys: int = 6
    async_part: str = attrs.field(default="thread", validator=attrs.validators.in_(("thread", "inline")))
    white_box: Optional[bool] = None
    native_savepoints: bool = True
    ttl_migration: bool = True


def _list_answer(got) -> Optional[list]:
    """A list state's answer: an empty list and None both mean empty (a TTL list returns [])."""
    return list(got) if got else None


def _map_answer(got) -> Optional[dict]:
    return dict(got) if got else None


class BackendHarness(SnapshotFormSteps, UpgradeSteps, HarnessBase):
    """See the module docstring. ``impl``: the state backend (``factory()``)."""

    operations = BACKEND_OPS
    crash_code = "K6"

    def __init__(self, impl, keys: int = 6, async_part: str = "thread", white_box: Optional[bool] = None,
                 observe: bool = False, native_savepoints: bool = True, ttl_migration: bool = True) -> None:
        super().__init__()
        self.native_savepoints = native_savepoints
        self.ttl_migration = ttl_migration
        self.specs: dict = dict(SPECS)  # the states as the job registers them now (upgrades change them)
        self.schema = 1  # the POJO's class version the job runs with (values.py)
        self.generation = 0  # how many upgrades the job went through
        self.generations: dict = {}  # cid -> the generation its snapshot was taken in
        self.savepoint_ids: set = set()  # cids of savepoints (their restores are K7)
        self.forms: dict = {}  # cid -> checkpoint, canonical or native
        self.impl = impl
        # What the backend answered, step by step (parity: the same program on two backends), if asked.
        self.observed: Optional[list] = [] if observe else None
        self.keys = keys
        self.async_part = async_part
        self.white_box = False
        self.kb = None
        self.states: dict = {}
        self.current_key = None
        self.key_type: Optional[str] = None
        self.max_parallelism = 0
        self.pool: list = []
        self.model: Optional[KeyedModel] = None
        self.frozen: dict = {}  # cid -> the model frozen at the synchronous part
        self.futures: dict = {}  # cid -> a running asynchronous part (checkpoint_async, not joined yet)
        self.handles: dict = {}  # cid -> the handle of a completed checkpoint
        self.threaded: set = set()  # cids whose asynchronous part ran on a thread of its own
        self.random = random.Random(0)
        self.compressed = False  # snapshot compression of the next checkpoints (the compress step)
        self._directory: Optional[str] = None
        self._cleanup: Optional[weakref.finalize] = None

    # ------------------------------------------------------------ programs

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        """``open`` first and only there; checkpoint ids started once; ``join`` and restores name a
        checkpoint started before (``join``: by ``checkpoint_async``); keys of the opened type. The
        empty program is valid (the program of a backend that could not even be built)."""
        if not steps:
            return True
        if steps[0].op != "open":
            return False
        family = FAMILIES[steps[0].args[0]]
        max_parallelism = steps[0].args[1]
        started, threaded = set(), set()
        for step in steps[1:]:
            op, args = step.op, step.args
            if op == "open":
                return False
            if op in KEYED and not family.holds(args[1]):
                return False
            if op in CHECKPOINTS:
                if args[0] in started:
                    return False
                started.add(args[0])
                if op in THREADED:
                    threaded.add(args[0])
            elif op in ("join", "restore", "rescale", "recover"):
                if args[0] not in (threaded if op == "join" else started):
                    return False
                if op == "restore" and not args[1] <= args[2] < max_parallelism:
                    return False
                if op == "rescale" and not args[1] < max_parallelism - 1:
                    return False
        return True

    @classmethod
    def normalise(cls, steps: list[Step]) -> list[Step]:
        """Checkpoint ids renumbered 0, 1, 2… in order of appearance."""
        ids: dict = {}
        out = []
        for step in steps:
            if step.op in CHECKPOINTS or step.op in ("join", "restore", "rescale", "recover"):
                step = Step(step.op, (ids.setdefault(step.args[0], len(ids)), *step.args[1:]))
            out.append(step)
        return out

    def close(self) -> None:
        """Wait for the asynchronous parts still running, then delete the checkpoint directory
        (also done when the harness is dropped without it, e.g. after a failing replay)."""
        if self._cleanup is not None:
            self._cleanup()
        else:
            _finish(self.futures, None)

    # ------------------------------------------------------------ the loop

    def _apply(self, step: Step) -> None:
        if self.futures:
            running = [cid for cid, f in self.futures.items() if not self._call(step, lambda f=f: f.done)]
            if running:
                time.sleep(yield_pause(self.random))
                if step.op in _WRITES:
                    self.coverage["async-part-racing-updates"] += 1
        if step.op != "open" and self.kb is None:
            self._fail(CRASH, "program", f"{self._render(step)}: no backend open (a program starts with open)")
        super()._apply(step)

    def _observe(self, answer) -> None:
        if self.observed is not None:
            self.observed.append((len(self.steps) - 1, answer))

    def _expect(self, step: Step, code: str, want, got, what: str = "") -> None:
        if want != got:
            self._fail(DIVERGENCE, code, f"{self._render(step)}{what}: model {want!r}, backend {got!r}", want, got)

    # ------------------------------------------------------------ opening

    def _op_open(self, step, key_type, max_parallelism):
        if self.kb is not None:
            self._fail(CRASH, "program", f"{self._render(step)}: the backend is already open")
        self.key_type, self.max_parallelism = key_type, max_parallelism
        self.pool = key_pool(key_type, self.keys)
        self.model = KeyedModel(self.specs.values())
        self.kb = self._call(step, self.impl.create_keyed_state_backend, self._key_serializer(), max_parallelism,
                             self._whole(), **self._classes())
        self.states = self._register(step, self.kb)
        self.current_key = None

    def _key_serializer(self):
        return FAMILIES[self.key_type].serializer()

    def _whole(self) -> KeyGroupRange:
        return KeyGroupRange(0, self.max_parallelism - 1)

    def _register(self, step, kb) -> dict:
        namespaces = IntSerializer()
        return {spec.name: self._call(step, kb.get_or_create_keyed_state, namespaces,
                                      descriptor_of(spec, self.schema))
                for spec in self.specs.values()}

    def _classes(self) -> dict:
        """The job's classes, for a backend that restores them: ``class_version`` (the POJO's
        version, values.py), passed only once it is not the first."""
        return {"class_version": self.schema} if self.schema != 1 else {}

    def _typed(self, name, value, count: bool = False):
        """The object a drawn value stands for in state ``name`` (values.py), new at each call
        (``count``: count the scenarios it reaches)."""
        if value is None:
            return None
        value_type = self.specs[name].value_type
        got = typed(value_type, self.schema, value)
        if count and value_type == "kryo" and b"" in (got.fields["data"], got.fields["tag"]):
            self.coverage["kryo-empty-array"] += 1
        return got

    # ------------------------------------------------------------ state-level steps

    def _at(self, step, name, key, namespace):
        """The state ``name`` with the current key set to ``key`` and its namespace to ``namespace``."""
        spec = self.specs[name]
        if not FAMILIES[self.key_type].holds(key):
            self._fail(CRASH, "program", f"{self._render(step)}: {key!r} is not a {self.key_type} key")
        if self.current_key is None or self.current_key != key or type(self.current_key) is not type(key):
            self._call(step, self.kb.set_current_key, fresh(key))
            self.current_key = key
        state = self.states[name]
        self._call(step, state.set_current_namespace, namespace)
        self.coverage[f"{spec.kind}-state"] += 1
        self.coverage["ttl-off" if spec.ttl is None else
                      "ttl-on-read-and-write" if spec.update_on_read else "ttl-on-create-and-write"] += 1
        if spec.value_type != "int":
            self.coverage[f"{spec.value_type}-state"] += 1
        return state

    def _read(self, step, name, key, namespace, read, answer, args=()):
        """A read through ``read`` (the state's method) against the model's ``answer``; K1."""
        stored = (name, key, namespace) in self.model.data
        state = self._at(step, name, key, namespace)
        got = self._call(step, lambda: answer(getattr(state, read)(*args)))
        self._observe(got)
        want = getattr(self.model, step.op)(name, key, namespace, *args)
        if stored and want is None and self.specs[name].ttl is not None:
            self.coverage["ttl-expired-read"] += 1
        self._expect(step, "K1", want, got)

    def _op_value(self, step, name, key, namespace):
        self._read(step, name, key, namespace, "value", lambda v: v)

    def _op_update(self, step, name, key, namespace, value):
        state = self._at(step, name, key, namespace)
        self._call(step, state.update, self._typed(name, value, count=True))
        self.model.update(name, key, namespace, self._typed(name, value))
        if value is None:
            self.coverage["null-update"] += 1

    def _op_list_get(self, step, name, key, namespace):
        self._read(step, name, key, namespace, "get", _list_answer)

    def _op_list_add(self, step, name, key, namespace, value):
        self._call(step, self._at(step, name, key, namespace).add, self._typed(name, value, count=True))
        self.model.list_add(name, key, namespace, self._typed(name, value))

    def _op_list_update(self, step, name, key, namespace, values):
        self._call(step, self._at(step, name, key, namespace).update, [self._typed(name, v, True) for v in values])
        self.model.list_update(name, key, namespace, [self._typed(name, v) for v in values])

    def _op_map_put(self, step, name, key, namespace, user_key, value):
        self._call(step, self._at(step, name, key, namespace).put, user_key, self._typed(name, value, count=True))
        self.model.map_put(name, key, namespace, user_key, self._typed(name, value))

    def _op_map_remove(self, step, name, key, namespace, user_key):
        self._call(step, self._at(step, name, key, namespace).remove, user_key)
        self.model.map_remove(name, key, namespace, user_key)

    def _op_map_get(self, step, name, key, namespace, user_key):
        self._read(step, name, key, namespace, "get", lambda v: v, (user_key,))

    def _op_map_contains(self, step, name, key, namespace, user_key):
        self._read(step, name, key, namespace, "contains", bool, (user_key,))

    def _op_map_entries(self, step, name, key, namespace):
        self._read(step, name, key, namespace, "entries", _map_answer)

    def _op_reduce_add(self, step, name, key, namespace, value):
        self._call(step, self._at(step, name, key, namespace).add, value)
        self.model.reduce_add(name, key, namespace, value)

    def _op_reduce_get(self, step, name, key, namespace):
        self._read(step, name, key, namespace, "get", lambda v: v)

    def _op_clear(self, step, name, key, namespace):
        self._call(step, self._at(step, name, key, namespace).clear)
        self.model.clear(name, key, namespace)

    def _op_keys(self, step, name, namespace):
        got = self._call(step, lambda: list(self.kb.get_keys(name, namespace)))
        self._observe(sorted(map(repr, got)))
        must, may = self.model.key_bounds(name, namespace)
        self.coverage["key-iteration"] += 1
        self._check_keys(step, "K2", got, must, may, f" (state {name!r}, namespace {namespace})")

    def _check_keys(self, step, code, got: list, must: set, may: set, where: str) -> None:
        seen: set = set()
        twice = [k for k in got if k in seen or seen.add(k)]
        if twice:
            self._fail(DIVERGENCE, code, f"{self._render(step)}{where}: key iteration lists {twice[:3]!r} twice",
                       sorted(map(repr, must)), list(map(repr, got)))
        missing, extra = must - seen, seen - may
        if missing or extra:
            self._fail(DIVERGENCE, code, f"{self._render(step)}{where}: key iteration misses "
                                         f"{sorted(map(repr, missing))[:3]} (they hold state) and lists "
                                         f"{sorted(map(repr, extra))[:3]} (they hold none)",
                       sorted(map(repr, must)), sorted(map(repr, seen)))

    def _op_advance(self, step, millis):
        self._call(step, self.impl.clock.advance, millis)
        self.model.advance(millis)

    # ------------------------------------------------------------ checkpoints

    def _streams(self, target: str, threshold: int = 0) -> CheckpointStreamFactory:
        """Memory streams, or file streams keeping at most ``threshold`` bytes inline (0: every
        snapshot in a file)."""
        if target == "memory":
            self.coverage["checkpoint-memory"] += 1
            return CheckpointStreamFactory()
        self.coverage["checkpoint-file"] += 1
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="cowcheck-backend-")
            self._cleanup = weakref.finalize(self, _finish, self.futures, self._directory)
        return CheckpointStreamFactory(self._directory, threshold=threshold)

    def _snapshot(self, step, kb, cid, streams):
        """``kb.snapshot``, compressed if the program said so (the keyword only then: an implementation
        without compression still runs every program that does not ask for it)."""
        if self.compressed:
            self.coverage["checkpoint-compressed"] += 1
            return self._call(step, kb.snapshot, cid, streams, compressed=True)
        return self._call(step, kb.snapshot, cid, streams)

    def _savepoint(self, step, cid, streams, form: str, kb=None):
        """``kb.savepoint`` (default: the program's backend) of ``form``, compressed as ``_snapshot``
        is (the keyword only then)."""
        kb = self.kb if kb is None else kb
        if self.compressed:
            self.coverage["savepoint-compressed"] += 1
            return self._call(step, kb.savepoint, cid, streams, form == "canonical", compressed=True)
        return self._call(step, kb.savepoint, cid, streams, form == "canonical")

    def _op_compress(self, step, on):
        """Snapshot compression is a backend's setting in Flink (read by a running asynchronous part as it
        writes): a change waits for the running ones first."""
        if on != self.compressed:
            for running in list(self.futures):
                self._complete(step, running)
        self.compressed = on

    def _take(self, step, cid, streams, form: Optional[str] = None):
        """The synchronous part: the implementation's snapshot (a savepoint of ``form``, if given,
        compressed as checkpoints are: Flink's savepoints of both forms honour snapshot compression)
        and the model's frozen copy."""
        if form is None:
            future = self._snapshot(step, self.kb, cid, streams)
        else:
            future = self._savepoint(step, cid, streams, form)
            self.savepoint_ids.add(cid)
        self.forms[cid] = form or "checkpoint"
        frozen = self.frozen[cid] = self.model.freeze()
        self.generations[cid] = self.generation
        if any(spec.expired(ms, frozen.time) for (name, _, _), ms in frozen.touched.items()
               for spec in (self.specs[name],)):
            self.coverage["checkpoint-drops-expired"] += 1
        return future

    def _op_checkpoint(self, step, cid, target, form: Optional[str] = None):
        future = self._take(step, cid, self._streams(target), form)
        self.handles[cid] = self._call(step, future.run)
        self._check_restore(step, cid, [self.handles[cid]], self._whole(), self._what(cid))

    def _op_checkpoint_async(self, step, cid, target, seed, form: Optional[str] = None):
        future = self._take(step, cid, YieldingStreamFactory(self._streams(target), seed), form)
        if self.async_part == "inline":
            self.handles[cid] = self._call(step, future.run)
            self._check_restore(step, cid, [self.handles[cid]], self._whole(), self._what(cid))
            return
        self._call(step, future.start)
        self.futures[cid] = future
        self.threaded.add(cid)
        self.coverage["async-part-on-thread"] += 1
        self.random = random.Random(seed)

    def _complete(self, step, cid) -> None:
        """Wait for ``cid``'s asynchronous part if it runs, then check its restore (K5)."""
        future = self.futures.pop(cid, None)
        if future is None:
            return
        self.handles[cid] = self._call(step, _wait, future)
        if self._current(cid):
            self._check_restore(step, cid, [self.handles[cid]], self._whole(), self._what(cid))

    def _op_join(self, step, cid):
        self._complete(step, cid)

    def _code(self, cid) -> str:
        return "K7" if cid in self.savepoint_ids else "K5" if cid in self.threaded else "K3"

    def _restore(self, step, handles: list, key_group_range: KeyGroupRange, code: str, what: str):
        try:
            return self._call(step, self.impl.create_keyed_state_backend, self._key_serializer(),
                              self.max_parallelism, key_group_range, handles, **self._classes())
        except CheckFailure as exc:
            if exc.failure.kind != CRASH:
                raise
            self._fail(DIVERGENCE, code, f"{self._render(step)}: restoring {what} into {key_group_range} raised "
                                         f"{exc.failure.actual}", "a restored backend", exc.failure.actual)

    def _check_restore(self, step, cid, handles: list, key_group_range: KeyGroupRange, what: str,
                       code: Optional[str] = None) -> None:
        """Restore ``handles`` into ``key_group_range`` and hold every state to the copy of the
        model frozen when ``cid`` was taken: what each key shows now, and the keys listed."""
        code = code or self._code(cid)
        if len(key_group_range) == self.max_parallelism:
            self.coverage["restore-same-range"] += 1
        self._count_handles(step, cid, handles)
        restored = self._restore(step, handles, key_group_range, code, what)
        self._expect_restored(step, cid, restored, key_group_range, code, what)
        self._dispose(step, restored)

    def _expect_restored(self, step, cid, restored, key_group_range, code: str, what: str) -> None:
        frozen, now, mp = self.frozen[cid], self.model.now, self.max_parallelism
        where = f" ({what} restored into {key_group_range})"

        def owned(key) -> bool:
            return key_group(key, mp) in key_group_range

        states = self._register(step, restored)
        wanted: dict = {}  # (state, namespace) -> the keys whose state is read back
        for spec in self.specs.values():
            for namespace in range(NAMESPACES):
                got = self._call(step, lambda: list(restored.get_keys(spec.name, namespace)))
                self._observe(sorted(map(repr, got)))
                must = set(frozen.entries(spec.name, namespace, now, owned))
                may = frozen.may_keys(spec.name, namespace, owned)
                self._check_keys(step, code, got, must, may, f"{where}, state {spec.name!r}, namespace {namespace}")
                wanted[(spec.name, namespace)] = may
        # Every key that may hold state is read in every state and namespace where it may (key
        # iteration, checked above, lists nothing else), and one owned key that holds none in any,
        # in every state and namespace: it must read as empty.
        owned_keys = [key for key in self.pool if owned(key)]
        spare = next((key for key in owned_keys if not any(key in keys for keys in wanted.values())), None)
        read = {"value": ("value", lambda v: v), "reducing": ("get", lambda v: v), "list": ("get", _list_answer),
                "map": ("entries", _map_answer)}
        for key in owned_keys:
            reads = [(spec, namespace) for spec in self.specs.values() for namespace in range(NAMESPACES)
                     if key == spare or key in wanted[(spec.name, namespace)]]
            if not reads:
                continue
            self._call(step, restored.set_current_key, fresh(key))
            for spec, namespace in reads:
                state, (method, answer) = states[spec.name], read[spec.kind]
                self._call(step, state.set_current_namespace, namespace)
                got = self._call(step, lambda: answer(getattr(state, method)()))
                self._observe(got)
                want = frozen.visible(spec.name, key, namespace, now)
                self._expect(step, code, want, got, f"{where}, state {spec.name!r}, key {key!r}, namespace "
                                                    f"{namespace}")

    def _dispose(self, step, kb) -> None:
        dispose = getattr(kb, "dispose", None)
        if callable(dispose):
            self._call(step, dispose)

    def _completed(self, step, cid) -> bool:
        """Whether ``cid`` completed (waiting for it) and was taken with the job's present classes
        and descriptors (a snapshot from before an ``upgrade`` is restored only by the upgrade: its
        restore into the new ones is an upgrade of its own, upgrades.py)."""
        self._complete(step, cid)
        return cid in self.handles and self._current(cid)

    def _current(self, cid) -> bool:
        return self.generations.get(cid, self.generation) == self.generation

    def _op_restore(self, step, cid, start, end):
        if not self._completed(step, cid):
            return
        target = KeyGroupRange(start, end).intersection(self._whole())
        if target.is_empty():
            return
        if len(target) < self.max_parallelism:
            self.coverage["restore-sub-range"] += 1
        self._check_restore(step, cid, [self.handles[cid]], target, self._what(cid))

    def _op_rescale(self, step, cid, split):
        if not self._completed(step, cid) or split >= self.max_parallelism - 1:
            return
        parts = [KeyGroupRange(0, split), KeyGroupRange(split + 1, self.max_parallelism - 1)]
        handles = []
        for i, part in enumerate(parts):
            restored = self._restore(step, [self.handles[cid]], part, "K4", self._what(cid))
            self._expect_restored(step, cid, restored, part, "K4", f"part {i + 1} of c{cid}")
            future = self._snapshot(step, restored, cid, CheckpointStreamFactory())
            handles.append(self._call(step, future.run))
            self._dispose(step, restored)
        self.coverage["restore-rescaled"] += 1
        self._check_restore(step, cid, handles, self._whole(), f"both parts of c{cid} merged", code="K4")

    def _op_recover(self, step, cid):
        for running in list(self.futures):
            self._complete(step, running)
        if cid not in self.handles or not self._current(cid):
            return
        self._check_restore(step, cid, [self.handles[cid]], self._whole(), self._what(cid))
        recovered = self._restore(step, [self.handles[cid]], self._whole(), self._code(cid), self._what(cid))
        self._dispose(step, self.kb)
        self.kb = recovered
        self.states = self._register(step, recovered)
        self.current_key = None
        self.model.recover(self.frozen[cid])
        self.coverage["recover-and-continue"] += 1


def _finish(futures: dict, directory: Optional[str]) -> None:
    """Wait for the asynchronous parts still running (their outcome is not checked: the program
    ended before their join), then delete the checkpoint directory they may still be writing to."""
    for future in futures.values():
        try:
            future.get(10.0)
        except Exception:
            pass
    futures.clear()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def _wait(future):
    """The handle of a running asynchronous part, once it is done (polled, so that the step time
    limit can interrupt the wait)."""
    while not future.done:
        time.sleep(0.0005)
    return future.get()
