"""Every example in docs/contract.md breaks the rule it illustrates, with that rule's code.

Each code's entry in the contract shows, under **Breaks it.**, a short program and
the implementation it runs on: a seeded mutant (``mutant:NAME``) or one of the tiny
broken implementations below, each a one-method mistake. :data:`EXAMPLES` holds the
same programs as steps. The tests render each program as its machine prints it and
check that the document shows exactly that text, then replay it and check that its
last step fails with the entry's code (and kind). The codes that are not about a
program (``construction``, ``worker-exit``, ``internal``...) are produced
here the way their entries describe.
"""

from __future__ import annotations

import contextlib
import copy
import json

import attrs
import pytest

import cowcheck.registry  # noqa: F401  (registers every machine)
from fault_seeds import SIZES, lone_trigger
from cowcheck.checkpoint.machine import small_backend
from cowcheck.core.contract import entries
from cowcheck.core.failures import CRASH, DIVERGENCE, INVARIANT, TIMEOUT
from cowcheck.core.impls import resolve
from cowcheck.core.limits import StepTimeLimit
from cowcheck.core.machine import machine_kind
from cowcheck.core.program import Step
from cowcheck.core.shrink import replay
from cowcheck.table.machine import same_object
from cowcheck.reference import CopyOnWriteStateMap
from cowcheck.reference.async_execution import AsyncExecutionController, RecordContext
from cowcheck.reference.checkpoint import HeapKeyedStateBackend
from cowcheck.reference.entry import StateMapEntry
from cowcheck.reference.keyed import HashMapStateBackend, KeyedStateBackend
from cowcheck.reference.keyed.migration import AS_IS, INCOMPATIBLE
from cowcheck.reference.operator import (DefaultOperatorStateBackend, HeapBroadcastState, OperatorStateBackends,
                                         PartitionableListState)
from cowcheck.reference.hashing import composite_hash
from cowcheck.reference.snapshot import CopyOnWriteStateMapSnapshot
from cowcheck.reference.state_table import CopyOnWriteStateTable
from cowcheck.spark_fuzz.executor import CampaignConfig, run_seed
from cowcheck.spark_fuzz.ranges import guarded_run_seed, run_range

# ------------------------------------------------- tiny broken maps (one mistake each)


class MisplacesNewEntries(CopyOnWriteStateMap):
    """Links a new entry into the bucket after the one its hash selects (an off-by-one)."""

    def _insert_entry(self, tab, index, key, namespace, h):
        return super()._insert_entry(tab, (index + 1) & (len(tab) - 1), key, namespace, h)


class ShadowsOnPut(CopyOnWriteStateMap):
    """A put of a key it holds links a second entry in front of the first (counted once)."""

    def put(self, key, namespace, state):
        tab, index, e = self._lookup(key, namespace)
        if e is None:
            return super().put(key, namespace, state)
        version = self.state_map_version
        tab[index] = StateMapEntry(key, namespace, state, e.hash, tab[index], version, version)


class ReadsSkipRehash(CopyOnWriteStateMap):
    """contains_key looks in both tables without moving the incremental rehash on."""

    def contains_key(self, key, namespace):
        h = composite_hash(key, namespace)
        for table in (self.primary_table, self.incremental_rehash_table):
            e = table[h & (len(table) - 1)]
            while e is not None:
                if e.hash == h and e.key == key and e.namespace == namespace:
                    return True
                e = e.next
        return False


class StampsNextVersion(CopyOnWriteStateMap):
    """A put stamps the state with the map's next version (V + 1) instead of V."""

    def put(self, key, namespace, state):
        super().put(key, namespace, state)
        self._lookup(key, namespace)[2].state_version = self.state_map_version + 1


class GrowsAtFullLoad(CopyOnWriteStateMap):
    """Sets the growth threshold to the capacity (load factor 1) instead of three quarters of it."""

    def _make_table(self, capacity):
        table = super()._make_table(capacity)
        self.threshold = capacity
        return table


class ReusesStateObject(CopyOnWriteStateMap):
    """A put of a key it holds copies the new list into the old state object."""

    def put(self, key, namespace, state):
        e = self._lookup(key, namespace)[2]
        if e is not None and isinstance(e.state, list):
            e.state[:] = state
        else:
            super().put(key, namespace, state)


class _ListBuckets:
    def __init__(self, m) -> None:
        self._map = m

    def __getattr__(self, name):
        value = getattr(self._map, name)
        if name in ("primary_table", "incremental_rehash_table"):
            return [None if head is None else [head] for head in value]
        return value


class ListBucketView(CopyOnWriteStateMap):
    """introspect() shows each non-empty bucket as a Python list holding its head entry."""

    def introspect(self):
        return _ListBuckets(self)


class _ForgetfulSnapshot(CopyOnWriteStateMapSnapshot):
    __slots__ = ()

    def release(self):
        if self.version in self.owner.snapshot_versions:
            self.owner.release_snapshot(self)  # ...but never sets its own flag


class ForgetsReleased(CopyOnWriteStateMap):
    """A released snapshot still says released == False."""

    def snapshot(self):
        return _ForgetfulSnapshot(self)


class HangsUnderTwoSnapshots(CopyOnWriteStateMap):
    """get spins for ever while two snapshots are live."""

    def get(self, key, namespace):
        while len(self.snapshot_versions) >= 2:
            pass
        return super().get(key, namespace)


def _map(cls):
    def factory(capacity: int = 4, state_copier=copy.deepcopy):
        return cls(capacity=capacity, state_copier=state_copier)

    factory.__name__ = cls.__name__
    return factory


def refuses_to_build(capacity: int = 4, state_copier=copy.deepcopy):
    """A factory that cannot build a map (a campaign seed's build raises)."""
    raise MemoryError("no room for another map")


# ------------------------------------------------- tiny broken tables, backends, controllers


class GetIgnoresNamespace(CopyOnWriteStateTable):
    """get reads namespace 0 whatever namespace it is asked for."""

    def get(self, key, namespace):
        return super().get(key, 0)


class RejectsEmptyState(CopyOnWriteStateTable):
    """put raises on an empty list state."""

    def put(self, key, namespace, state):
        if not state:
            raise ValueError("empty state")
        super().put(key, namespace, state)


def _table(cls):
    def factory():
        return cls(max_parallelism=128, state_copier=same_object)

    factory.__name__ = cls.__name__
    return factory


class MergeTakesLastHandle(HeapKeyedStateBackend):
    """A restore from several handles gives every key group of the target range to each handle in turn."""

    @staticmethod
    def _restore_range(handle_range, target):
        return target


class TriggersBelowBatchSize(AsyncExecutionController):
    """Runs a batch once the active queue is one request short of the batch size."""

    def trigger_if_needed(self, force=False):
        if not force and self.buffer.active_queue_size() < self.batch_size - 1:
            return False
        return super().trigger_if_needed(True)


class PostsCallbacksTwice(AsyncExecutionController):
    """Posts every callback to the mailbox twice."""

    def _callback_runner(self, context):
        submit = super()._callback_runner(context)

        def twice(task):
            submit(task)
            submit(task)

        return twice


class _KeepsKeyFlag(RecordContext):
    __slots__ = ()

    def reference_count_reached_zero(self, runner):
        if self.key_occupied:  # disposes, but leaves key_occupied set
            if runner is None:
                self.disposer(self)
            else:
                runner(lambda: self.disposer(self))


class KeepsKeyFlag(AsyncExecutionController):
    """A finished record's context still says it holds its key."""

    def build_context(self, record, key):
        return _KeepsKeyFlag(record, key, self.dispose_context, self.epoch_manager.on_record())


class CompletesWithoutExecuting(AsyncExecutionController):
    """Completes every request at once, as if it were a sync point, without running it."""

    def insert_active_buffer(self, request):
        request.future.complete(None)


class CallbacksWithPostingContext(AsyncExecutionController):
    """Runs a callback with the context that was current when it was posted, not its record's."""

    def _callback_runner(self, context):
        def submit(task):
            current = self.current_context

            def mail():
                self.set_current_context(current)
                task()

            self.mailbox.post(mail)

        return submit


class KeyedMergeTakesLastHandle(HashMapStateBackend):
    """A state backend whose restore from several handles reads only the last one."""

    def __init__(self):
        super().__init__(capacity=4)

    def create_keyed_state_backend(self, key_serializer, max_parallelism, key_group_range, state_handles=()):
        return super().create_keyed_state_backend(key_serializer, max_parallelism, key_group_range,
                                                  list(state_handles)[-1:])


class _RemovesNothing(HeapBroadcastState):
    __slots__ = ()

    def remove(self, key):
        pass


class _AcceptsNull(PartitionableListState):
    __slots__ = ()

    def add(self, value):
        self.elements.append(value)


class _ContainsByLookup(HeapBroadcastState):
    __slots__ = ()

    def contains(self, key):
        return self.entries_map[key] is not None or True


class _IgnoresSerializers(DefaultOperatorStateBackend):
    def _list_state(self, descriptor, mode):
        state = self.list_states.get(descriptor.name)
        if state is not None and descriptor.name not in self._accessed:
            state.meta = attrs.evolve(state.meta, value_serializer=descriptor.element_serializer)  # no check
            self._accessed[descriptor.name] = state
        return super()._list_state(descriptor, mode)


def _operator(name: str, **classes):
    """Operator state backends of a backend class with ``classes`` as its state classes."""
    backend_class = type(f"{name}Backend", (DefaultOperatorStateBackend,), classes)

    def factory():
        return OperatorStateBackends(backend_class=backend_class)

    factory.__name__ = name
    return factory


BroadcastRemoveIgnored = _operator("BroadcastRemoveIgnored", broadcast_state_class=_RemovesNothing)
ListAddAcceptsNull = _operator("ListAddAcceptsNull", list_state_class=_AcceptsNull)
BroadcastContainsRaises = _operator("BroadcastContainsRaises", broadcast_state_class=_ContainsByLookup)


def IncompatibleSerializerAccepted():
    return OperatorStateBackends(backend_class=_IgnoresSerializers)


class AcceptsAnyUpgrade(HashMapStateBackend):
    """A state backend whose restored states take any serializer a descriptor brings: an incompatible
    one is treated as compatible as is (nothing converted, nothing refused)."""

    def __init__(self):
        super().__init__(capacity=4, backend_class=_AcceptsAnySerializer)


class _AcceptsAnySerializer(KeyedStateBackend):
    def state_compatibility(self, old, new):
        outcome = super().state_compatibility(old, new)
        return AS_IS if outcome == INCOMPATIBLE else outcome


# ------------------------------------------------- the examples


@attrs.frozen
class Example:
    """A program of ``machine`` that fails at its last step with ``kind`` and the entry's code
    on ``impl`` (a built-in spec, or a factory above); ``white_box`` as the run is configured
    (None: as the machine decides), ``step_time_limit`` if the example hangs."""

    machine: str
    impl: object
    kind: str
    steps: tuple
    white_box: bool | None = None
    step_time_limit: float | None = None

    @property
    def impl_name(self) -> str:
        if isinstance(self.impl, str):
            return self.impl
        return getattr(self.impl, "__name__", None) or self.impl.func.__name__  # small_backend's partial


S = Step
ARRIVE_0 = S("arrive", (0, [["add", "a", 5]]))
ARRIVE_1 = S("arrive", (1, [["add", "a", 5]]))
OPEN = S("open", ("int", 8))

EXAMPLES: dict[str, Example] = {
    # the map: structural invariants (white-box)
    "I0": Example("map", _map(ListBucketView), INVARIANT, (S("put", (0, 0, [])),)),
    "I1": Example("map", _map(MisplacesNewEntries), INVARIANT, (S("put", (0, 0, [])),)),
    "I2": Example("map", "mutant:remove-counts-primary-table", INVARIANT,
                  (S("put_range", ("int", 0, 9, 0, [])), S("remove", (0, 0)))),
    "I3": Example("map", _map(ShadowsOnPut), INVARIANT, (S("put", (0, 0, [])), S("put", (0, 0, [1])))),
    "I4": Example("map", _map(ReadsSkipRehash), INVARIANT,
                  (S("put_range", ("int", 0, 5, 0, [])), S("contains_key", (0, 0)))),
    "I5": Example("map", "mutant:release-resets-required-version", INVARIANT,
                  (S("snapshot", (0,)), S("snapshot", (1,)), S("release", (0,)))),
    "I6": Example("map", _map(StampsNextVersion), INVARIANT, (S("put", (0, 0, [])),)),
    "I7": Example("map", _map(GrowsAtFullLoad), INVARIANT, (S("put", (0, 0, [])),)),
    "I8": Example("map", _map(ReusesStateObject), INVARIANT,
                  (S("put", (0, 0, [1])), S("snapshot", (0,)), S("put", (0, 0, [2])))),
    "I9": Example("map", "mutant:skip-prefix-copy", INVARIANT,
                  (S("put", (2, 2, [])), S("put", (0, 0, [])), S("snapshot", (0,)), S("put", (2, 2, [])))),
    # the map: the model's properties (black-box)
    "P1": Example("map", "mutant:flink-7683-keys-ignore-rehash-table", DIVERGENCE,
                  (S("put_range", ("int", 0, 9, 0, [])), S("keys", (0,)))),
    "P2": Example("map", "mutant:transformed-snapshot-keeps-dropped", DIVERGENCE,
                  (S("put", (0, 0, [])), S("snapshot", (0,)), S("read_snapshot_transformed", (0, "drop_even")))),
    "P3": Example("map", _map(ForgetsReleased), DIVERGENCE, (S("snapshot", (0,)), S("release", (0,)))),
    "P4": Example("map", "mutant:identity-compared-keys", DIVERGENCE,
                  (S("put", (1000, 0, [])), S("remove", (1000, 0)))),
    "P5": Example("map", "mutant:snapshot-version-not-bumped", DIVERGENCE, (S("snapshot", (0,)),)),
    "P6": Example("map", "mutant:get-without-state-copy", DIVERGENCE,
                  (S("put", (0, 0, [])), S("snapshot", (0,)), S("get_mutate", (0, 0, 1)))),
    "P7": Example("map", "mutant:remove-without-mod-count", DIVERGENCE,
                  (S("put", (0, 0, [])), S("iterate_modify", (0, 0, 0, "remove")))),
    # the state table
    "T1": Example("table", _table(GetIgnoresNamespace), DIVERGENCE, (S("put", (0, 1, [])), S("get", (0, 1)))),
    "T2": Example("table", "mutant:table-set-meta-info-keeps-copier", DIVERGENCE,
                  (S("set_meta_info", ()), S("put", (5, 1, [])), S("snapshot", (0,)), S("get_mutate", (5, 1, 0)),
                   S("write_snapshot", (0,)))),
    "T3": Example("table", _table(RejectsEmptyState), CRASH, (S("put", (0, 0, [])),)),
    # checkpoints
    "C1": Example("checkpoint", "mutant:checkpoint-writes-live-state", DIVERGENCE,
                  (S("checkpoint", (0, 20480)), S("kv_put", ("b", 1, 0, [])), S("complete", (0,)))),
    "C2": Example("checkpoint", "mutant:checkpoint-writes-live-state", DIVERGENCE,
                  (S("checkpoint", (0, 20480)), S("checkpoint", (1, 20480)), S("kv_put", ("a", 1, 0, [])),
                   S("complete", (0,)))),
    "C3": Example("checkpoint", "mutant:checkpoint-leak-on-abort", DIVERGENCE,
                  (S("checkpoint", (0, 20480)), S("cancel", (0,)))),
    "C4": Example("checkpoint", small_backend(MergeTakesLastHandle), DIVERGENCE,
                  (S("checkpoint", (0, 20480)), S("complete", (0,)), S("rescale", (0, 2)))),
    "C5": Example("checkpoint", "mutant:checkpoint-keeps-partial-file", DIVERGENCE,
                  (S("checkpoint", (0, 0)), S("write_key_group", (0,)), S("cancel", (0,)))),
    # keyed states
    "K1": Example("backend", "mutant:backend-ttl-expires-late", DIVERGENCE,
                  (OPEN, S("update", ("value_ttl", 0, 0, 1)), S("advance", (10,)), S("value", ("value_ttl", 0, 0)))),
    "K2": Example("backend", "mutant:backend-list-update-empty-keeps-entry", DIVERGENCE,
                  (OPEN, S("list_update", ("list", 0, 0, [])), S("keys", ("list", 0)))),
    "K3": Example("backend", "mutant:backend-checkpoint-ignores-ttl-cleanup", DIVERGENCE,
                  (OPEN, S("update", ("value_ttl", 0, 0, 1)), S("advance", (10,)), S("checkpoint", (0, "memory")))),
    "K4": Example("backend", KeyedMergeTakesLastHandle, DIVERGENCE,
                  (OPEN, S("update", ("value", 0, 0, 1)), S("checkpoint", (0, "memory")), S("rescale", (0, 6)))),
    "K5": Example("backend", "mutant:backend-release-at-sync-point", DIVERGENCE,
                  (OPEN, S("list_add", ("list", 0, 0, 1)), S("checkpoint_async", (0, "memory", 0)),
                   S("list_add", ("list", 0, 0, 2)), S("join", (0,)))),
    "K6": Example("backend", "mutant:backend-null-update-stores-null", CRASH,
                  (OPEN, S("update", ("value", 0, 0, None)), S("checkpoint", (0, "memory")))),
    # operator state
    "O1": Example("operator", BroadcastRemoveIgnored, DIVERGENCE,
                  (S("open", (1,)), S("put", (0, "bcast_int_long", 1, 1)), S("remove", (0, "bcast_int_long", 1)),
                   S("entries", (0, "bcast_int_long")))),
    "O2": Example("operator", ListAddAcceptsNull, DIVERGENCE, (S("open", (1,)), S("add", (0, "split_int", -1)))),
    "O3": Example("operator", "mutant:operator-union-to-one-instance", DIVERGENCE,
                  (S("open", (2,)), S("add", (0, "union_int", 1)), S("checkpoint", (0, False, "memory")))),
    "O4": Example("operator", "mutant:operator-split-drops-remainder", DIVERGENCE,
                  (S("open", (1,)), S("add", (0, "split_int", 1)), S("checkpoint", (0, False, "memory")),
                   S("restore", (0, 2)))),
    "O5": Example("operator", "mutant:operator-broadcast-snapshot-iterates-live-map", DIVERGENCE,
                  (S("open", (1,)), S("put", (0, "bcast_int_long", 1, 1)), S("checkpoint_async", (0, False, "memory", 0)),
                   S("put", (0, "bcast_int_long", 2, 2)), S("join", (0,)))),
    "O6": Example("operator", IncompatibleSerializerAccepted, DIVERGENCE,
                  (S("open", (1,)), S("checkpoint", (0, False, "memory")), S("recover", (0, 1, "split_int")))),
    "O7": Example("operator", BroadcastContainsRaises, CRASH, (S("open", (1,)), S("contains", (0, "bcast_int_long", 3)))),
    # savepoints, upgrades and streams
    "K7": Example("backend", "mutant:backend-savepoint-skips-last-state", DIVERGENCE,
                  (OPEN, S("update", ("value", 0, 0, 1)), S("savepoint", (0, "canonical", "memory")))),
    "K8": Example("backend", "mutant:backend-migration-reads-with-old-serializer", DIVERGENCE,
                  (OPEN, S("update", ("value_pojo", 0, 0, 7)), S("upgrade", ("checkpoint", 2, "same")))),
    "K9": Example("backend", AcceptsAnyUpgrade, DIVERGENCE,
                  (OPEN, S("update", ("value_pojo", 0, 0, 7)), S("upgrade", ("checkpoint", 4, "same")))),
    "K10": Example("backend", "mutant:backend-stream-eof-on-empty-read", DIVERGENCE,
                   (OPEN, S("tail_checkpoint", (0, 0, "canonical")))),
    # the async execution controller
    "A1": Example("async", "mutant:async-unblock-newest-first", DIVERGENCE,
                  (S("arrive", (0, [["add", "b", 5]])), S("arrive", (0, [["sum", "a", "b", "b"]])),
                   S("arrive", (0, [["add_in_accept", "a", 3]])), S("arrive", (0, [["add_in_accept", "b", 3]])),
                   S("drain", (2,)))),
    "A2": Example("async", "mutant:async-occupy-overwrites", DIVERGENCE,
                  (S("arrive", (0, [["add", "b", 2]])), S("arrive", (0, [["add_in_accept", "b", 1]])))),
    "A3": Example("async", "mutant:async-in-flight-off-by-one", DIVERGENCE,
                  tuple(S("arrive", (0, [["add", "a", i]])) for i in range(6)), white_box=False),
    "A4": Example("async", TriggersBelowBatchSize, INVARIANT, (ARRIVE_0, ARRIVE_1), white_box=True),
    "A5": Example("async", PostsCallbacksTwice, DIVERGENCE, (ARRIVE_0, S("drain", (0,)))),
    "A6": Example("async", KeepsKeyFlag, INVARIANT, (ARRIVE_0, S("drain", (0,))), white_box=True),
    "A7": Example("async", CompletesWithoutExecuting, DIVERGENCE, (S("arrive", (0, [["add", "a", 5], ["read", "a"]])),)),
    "A8": Example("async", "mutant:async-timeout-never-fires", DIVERGENCE,
                  (S("arrive", (0, [["add", "b", 2]])), S("advance_time", (30,))), white_box=False),
    "A9": Example("async", CallbacksWithPostingContext, DIVERGENCE,
                  (ARRIVE_0, ARRIVE_1, S("trigger", ()), S("run_mail", (1,)))),
    "A10": Example("async", "mutant:async-completion-not-released", TIMEOUT, (ARRIVE_0, S("drain", (0,)))),
    "A11": Example("async", "mutant:async-epoch-fires-twice", DIVERGENCE,
                   (S("non_record", ([[0, [["put", "b", 0]]]],)),)),
    # not properties, but printed like them
    "time-limit": Example("map", _map(HangsUnderTwoSnapshots), TIMEOUT,
                          (S("put", (0, 0, [])), S("snapshot", (0,)), S("snapshot", (1,)), S("get", (0, 0))),
                          step_time_limit=0.5),
    "program": Example("map", "reference", CRASH, (S("release", (0,)),)),
}

# Codes whose example is not a program: where the test below produces each one.
NOT_PROGRAMS = ("construction", "worker-exit", "worker-protocol", "spark-task-failed", "internal", "unreproducible")


def _factory(example: Example):
    return resolve(example.impl, example.machine).factory if isinstance(example.impl, str) else example.impl


def run_example(example: Example):
    """The failure the example's program gives (None if it passes)."""
    kind = machine_kind(example.machine)
    make, options = kind.replay_setup(_factory(example), kind.config(white_box=example.white_box))
    limit = StepTimeLimit(example.step_time_limit) if example.step_time_limit else contextlib.nullcontext()
    with limit:
        return replay(list(example.steps), make, harness_class=kind.harness_class, **options)


def rendered(example: Example) -> str:
    """The program as the machine prints a failing one: a line per step, the last one marked."""
    kind = machine_kind(example.machine)
    lines = [kind.render(step) for step in example.steps]
    lines[-1] += "   # <-- fails here"
    return "\n".join(lines)


def test_every_code_of_the_contract_has_an_example_here():
    assert set(entries()) == set(EXAMPLES) | set(NOT_PROGRAMS)


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_contract_shows_the_example_program_as_the_machine_prints_it(code):
    example = EXAMPLES[code]
    entry = entries()[code]
    assert entry.example == rendered(example), f"docs/contract.md, {code}: show this program:\n{rendered(example)}"
    assert example.impl_name in entry.fields["Breaks it"]


@pytest.mark.parametrize("code", sorted(EXAMPLES))
def test_the_example_program_fails_at_its_last_step_with_its_code(code):
    example = EXAMPLES[code]
    failure = run_example(example)
    assert failure is not None
    assert (failure.kind, failure.code, failure.step_index) == (example.kind, code, len(example.steps) - 1)


def test_a_correct_map_passes_every_map_example():
    """The examples fail because of their implementations' mistakes, not because of the programs."""
    for code, example in EXAMPLES.items():
        if example.machine == "map" and code not in ("program",):
            assert run_example(attrs.evolve(example, impl="reference")) is None, code


def test_construction_a_campaign_seed_whose_build_raises_stores_an_empty_program():
    outcome = run_seed(3, CampaignConfig(impl=f"{__name__}:refuses_to_build"))
    assert (outcome.kind, outcome.code) == (CRASH, "construction")
    assert outcome.counterexample is not None and json.loads(outcome.counterexample)["steps"] == []


def test_worker_exit_a_seed_that_ends_its_process():
    start, stop, seed = lone_trigger()
    result = run_range(start, stop, CampaignConfig(impl="faults:exits_on_77", sizes=SIZES))
    assert [(o.seed, o.kind, o.code) for o in result.failures] == [(seed, CRASH, "worker-exit")]


def test_internal_an_error_of_cowchecks_own_code(monkeypatch):
    from cowcheck.map.harness import Harness

    def planted(self, step):
        raise KeyError("a bug planted in cowcheck")

    monkeypatch.setattr(Harness, "check_size", planted)
    outcome = guarded_run_seed(1, CampaignConfig(steps=5))
    assert (outcome.kind, outcome.code) == ("INTERNAL", "internal")


def test_unreproducible_a_deterministic_implementations_failure_no_replay_shows(monkeypatch):
    from cowcheck.map.harness import Harness

    check, seen = Harness.check_size, []

    def fails_once(self, step):  # cowcheck's own check goes wrong once, never on replay
        if len(self.steps) == 3 and not seen:
            seen.append(step)
            self._fail(DIVERGENCE, "P4", "sizes differ (seen once)")
        return check(self, step)

    monkeypatch.setattr(Harness, "check_size", fails_once)
    outcome = guarded_run_seed(1, CampaignConfig(steps=5))
    assert (outcome.kind, outcome.code, outcome.failed) == ("INTERNAL", "unreproducible", False)


def test_spark_task_failed_names_the_spark_test_that_produces_it():
    """The Spark job is too slow for this file; the entry names the test that runs it."""
    import pathlib

    test = "test_without_isolation_a_dying_python_worker_costs_a_retry_not_the_campaign"
    assert test in entries()["spark-task-failed"].fields["Breaks it"]
    source = (pathlib.Path(__file__).parent / "test_campaign_spark.py").read_text()
    assert f"def {test}(" in source and '"spark-task-failed"' in source
