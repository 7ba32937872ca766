import pytest

from cowcheck.model import ModelMap
from cowcheck.core.failures import DIVERGENCE, INVARIANT, CheckFailure
from cowcheck.map.harness import Harness
from cowcheck.core.program import Step
from cowcheck.reference import CopyOnWriteStateMap


def run(harness: Harness, steps: list) -> Harness:
    for step in steps:
        harness.apply(step)
    return harness


def failure_of(harness: Harness, steps: list):
    with pytest.raises(CheckFailure) as info:
        run(harness, steps)
    return info.value.failure


# A program touching every operation: collisions in bucket 0 (key == namespace),
# overlapping snapshots, in-place mutation, a rehash at capacity 4, live
# iteration across changes, the visitor and a transformed snapshot read.
EVERY_OPERATION = [
    Step("put", (1, 1, [1])),
    Step("put", (2, 2, [2])),
    Step("put", (3, 3, [3])),
    Step("snapshot", (0,)),
    Step("put", (2, 2, [20])),
    Step("get_mutate", (1, 1, 9)),
    Step("read_snapshot", (0,)),
    Step("transform", (3, 3, 7)),
    Step("put_and_get_old", (1, 1, [10])),
    Step("snapshot", (1,)),
    Step("remove_and_get_old", (2, 2)),
    Step("put", (4, 0, [4])),
    Step("put", (5, 0, [5])),
    Step("put", (6, 0, [6, 6])),
    Step("get", (3, 3)),
    Step("snapshot", (2,)),
    Step("contains_key", (5, 0)),
    Step("remove", (4, 0)),
    Step("release", (1,)),
    Step("read_snapshot", (0,)),
    Step("read_snapshot", (2,)),
    Step("iterate", ()),
    Step("keys", (0,)),
    Step("size_of_namespace", (0,)),
    Step("rehash", (-1, -1, 8)),
    Step("iterate_modify", (1, 7, 0, "put")),
    Step("iterate_modify", (2, 7, 0, "remove")),
    Step("iterate_modify", (1, 5, 0, "put")),
    Step("visit", (2,)),
    Step("read_snapshot_transformed", (2, "drop_even")),
    Step("release", (0,)),
    Step("get_mutate", (5, 0, 1)),
    Step("release", (0,)),
]


def test_reference_map_passes_a_hand_written_program_touching_every_operation():
    h = run(Harness(CopyOnWriteStateMap(capacity=4)), EVERY_OPERATION)
    assert h.white_box
    assert len(EVERY_OPERATION) == len(h.steps)
    assert {"snapshot-not-rehashing", "mutate-returned-under-snapshot", "update-middle-snap"} <= set(h.coverage)


def test_model_passes_the_same_program_black_box():
    h = run(Harness(ModelMap()), EVERY_OPERATION)
    assert not h.white_box


def test_reference_map_passes_a_program_that_snapshots_while_rehashing():
    m = CopyOnWriteStateMap(capacity=4)
    h = Harness(m, white_box=True)
    steps = [Step("put", (k, 0, [k])) for k in range(9)]  # the 9th put leaves the rehash at bucket 6 of 8
    run(h, steps)
    assert m.is_rehashing and 0 < m.rehash_index < len(m.primary_table)
    run(h, [
        Step("snapshot", (0,)),
        Step("get_mutate", (3, 0, 1)),
        Step("rehash", (-1, -1, 4)),
        Step("snapshot", (1,)),
        Step("remove", (5, 0)),
        Step("read_snapshot", (0,)),
        Step("read_snapshot", (1,)),
        Step("release", (1,)),
        Step("release", (0,)),
    ])
    assert h.coverage["snapshot-rehashing-all-regions"] == 1  # s0, taken mid-rehash with all three regions
    assert h.coverage["snapshot-not-rehashing"] == 1  # s1: the reads finished the rehash


class GetNeverCopies(CopyOnWriteStateMap):
    """Broken on purpose: get hands out the shared state even under a snapshot."""

    def get(self, key, namespace):
        for entry in self.entries():
            if (entry.key, entry.namespace) == (key, namespace):
                return entry.state
        return None


class EntriesNeverCopied(CopyOnWriteStateMap):
    """Broken on purpose: writes go to the entry a snapshot shares."""

    def _chained_copy_on_write(self, tab, idx, until):
        return until


class ReleaseResetsRequiredVersion(CopyOnWriteStateMap):
    """Broken on purpose (pre-merge prototype bug): any release turns copy-on-write off."""

    def release_snapshot_version(self, version):
        super().release_snapshot_version(version)
        self.highest_required_snapshot_version = 0


def test_get_that_never_copies_is_reported_as_identity_divergence():
    steps = [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("get_mutate", (1, 0, 9))]
    failure = failure_of(Harness(GetNeverCopies(capacity=4)), steps)
    assert (DIVERGENCE, "P6", 2) == (failure.kind, failure.code, failure.step_index)


def test_check_failure_is_an_assertion_error_carrying_the_failure():
    steps = [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("get", (1, 0))]
    with pytest.raises(AssertionError) as info:
        run(Harness(GetNeverCopies(capacity=4)), steps)
    assert isinstance(info.value, CheckFailure)
    assert "P6" == info.value.failure.code


def test_write_to_a_shared_entry_is_reported_as_invariant_i9_in_white_box_mode():
    steps = [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("put", (1, 0, [2]))]
    failure = failure_of(Harness(EntriesNeverCopied(capacity=4)), steps)
    assert (INVARIANT, "I9", 2) == (failure.kind, failure.code, failure.step_index)


def test_write_to_a_shared_entry_is_reported_as_snapshot_divergence_in_black_box_mode():
    steps = [
        Step("put", (1, 0, [1])),
        Step("snapshot", (0,)),
        Step("put", (1, 0, [2])),
        Step("read_snapshot", (0,)),
    ]
    failure = failure_of(Harness(EntriesNeverCopied(capacity=4), white_box=False), steps)
    assert (DIVERGENCE, "P2", 3) == (failure.kind, failure.code, failure.step_index)


def test_release_that_resets_required_version_is_reported_as_invariant_i5():
    steps = [Step("put", (1, 0, [1])), Step("snapshot", (0,)), Step("snapshot", (1,)), Step("release", (1,))]
    failure = failure_of(Harness(ReleaseResetsRequiredVersion(capacity=4)), steps)
    assert (INVARIANT, "I5", 3) == (failure.kind, failure.code, failure.step_index)


def test_release_that_resets_required_version_is_caught_black_box_by_identity():
    steps = [
        Step("put", (1, 0, [1])),
        Step("snapshot", (0,)),
        Step("snapshot", (1,)),
        Step("release", (1,)),
        Step("get_mutate", (1, 0, 9)),
    ]
    failure = failure_of(Harness(ReleaseResetsRequiredVersion(capacity=4), white_box=False), steps)
    assert (DIVERGENCE, "P6") == (failure.kind, failure.code)


def test_snapshot_id_reused_in_one_program_is_reported_as_a_program_error():
    steps = [Step("snapshot", (0,)), Step("snapshot", (0,))]
    failure = failure_of(Harness(CopyOnWriteStateMap(capacity=4)), steps)
    assert "program" == failure.code


# ------------------------------------------------- comparing entry lists


@pytest.mark.parametrize("symbolic", [False, True])
def test_same_entries_ignores_order_and_sees_every_difference(symbolic):
    from cowcheck.core.states import same_entries

    a = [(1, 0, [1, 2]), (2, 0, None), (3, 1, [])]
    assert same_entries(a, list(reversed(a)), symbolic)
    assert not same_entries(a, a[:2], symbolic)
    assert not same_entries(a, a[:2] + [(3, 1, [0])], symbolic)
    assert not same_entries(a, a[:2] + [(3, 0, [])], symbolic)
    assert not same_entries(a, [a[0], a[0], a[2]], symbolic)


def test_same_entries_settles_unsortable_values_and_lists_for_tuples_by_the_json_form():
    from cowcheck.core.states import same_entries

    mixed = [("k", 0, [1]), (1, "n", None)]  # str and int keys do not sort together
    assert same_entries(mixed, list(reversed(mixed)))
    assert not same_entries(mixed, [("k", 0, [2]), (1, "n", None)])
    assert same_entries([(1, 0, [5])], [[1, 0, (5,)]])  # one JSON form


def test_live_iteration_and_snapshot_reads_compare_as_entry_lists_and_show_them_as_json():
    h = run(Harness(CopyOnWriteStateMap(capacity=4)), [Step("put", (1, 0, [5])), Step("iterate", ())])
    assert (['[1, 0, [5]]'], ['[1, 0, [5]]']) == h.observed
