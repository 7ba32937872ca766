import pytest

from cowcheck.model import ModelConcurrentModification, ModelMap, ModelReleaseError


def filled_model(n=4) -> ModelMap:
    m = ModelMap()
    for k in range(n):
        m.put(k, 0, [k])
    return m


def test_model_answers_keyed_reads_like_a_mapping():
    m = filled_model()
    assert [2] == m.get(2, 0)
    assert m.get(2, 1) is None
    assert m.contains_key(3, 0)
    assert not m.contains_key(3, 1)
    assert 4 == len(m)


def test_model_put_and_get_old_and_remove_and_get_old_return_previous_states():
    m = filled_model()
    assert [1] == m.put_and_get_old(1, 0, [10])
    assert m.put_and_get_old(9, 0, [9]) is None
    assert [10] == m.remove_and_get_old(1, 0)
    assert m.remove_and_get_old(1, 0) is None
    assert 4 == len(m)


def test_model_transform_passes_old_state_or_none():
    m = ModelMap()
    m.transform(1, 0, 5, lambda old, value: [old, value])
    m.transform(1, 0, 6, lambda old, value: old + [value])
    assert [None, 5, 6] == m.get(1, 0)


def test_model_snapshot_versions_are_1_2_3():
    m = ModelMap()
    snapshots = [m.snapshot() for _ in range(3)]
    assert [1, 2, 3] == [s.version for s in snapshots]


def test_model_snapshot_versions_never_repeat_after_release():
    m = ModelMap()
    m.snapshot().release()
    assert 2 == m.snapshot().version


def test_model_snapshot_is_frozen_against_later_puts_and_removes():
    m = filled_model()
    s = m.snapshot()
    m.put(0, 0, [100])
    m.put(7, 0, [7])
    m.remove(1, 0)
    assert [(0, 0, [0]), (1, 0, [1]), (2, 0, [2]), (3, 0, [3])] == sorted(s)
    assert 4 == len(s)


def test_model_snapshot_is_frozen_against_in_place_mutation_of_values_returned_by_get():
    m = filled_model()
    s = m.snapshot()
    m.get(2, 0).append(99)
    assert [2, 99] == m.get(2, 0)
    assert (2, 0, [2]) in list(s)


def test_model_snapshot_holds_what_an_eager_deep_copy_would_hold_under_random_programs():
    """Snapshots save a slot's value only when it first changes; that must equal a deep
    copy of the whole map taken when the snapshot was (the oracle's definition, docs/contract.md §9)."""
    import copy
    import random

    for seed in range(200):
        r = random.Random(seed)
        m = ModelMap()
        eager = {}  # version -> deep copy of the content when taken
        live = []
        for _ in range(60):
            k, n = r.randrange(6), r.randrange(2)
            op = r.randrange(8)
            if op == 0:
                m.put(k, n, [r.randrange(9)])
            elif op == 1:
                m.remove(k, n)
            elif op == 2:
                m.transform(k, n, r.randrange(9), lambda old, v: (old or []) + [v] if r.random() < 0.5
                            else (old.append(v) or old) if old is not None else [v])
            elif op == 3:
                got = m.get(k, n)
                if got is not None:
                    got.append(r.randrange(9))  # the caller mutates what it was handed
            elif op == 4:
                m.put_and_get_old(k, n, [r.randrange(9)])
            elif op == 5:
                s = m.snapshot()
                eager[s.version] = sorted(copy.deepcopy(list(m)))
                live.append(s)
            elif op == 6 and live:
                live.pop(r.randrange(len(live))).release()
            for s in live:
                assert eager[s.version] == sorted(s), (seed, s.version)
                assert len(eager[s.version]) == len(s)


def test_model_hands_out_copies_only_while_a_newer_snapshot_is_live():
    m = ModelMap()
    state = [1]
    m.put(1, 0, state)
    assert m.get(1, 0) is state
    s = m.snapshot()
    copied = m.get(1, 0)
    assert copied is not state
    assert m.get(1, 0) is copied
    s.release()
    assert m.get(1, 0) is copied


def test_model_snapshot_iterate_with_transformer_drops_none_and_transforms():
    m = filled_model()
    s = m.snapshot()
    result = s.iterate(lambda state: None if state[0] % 2 else state + ["t"])
    assert [(0, 0, [0, "t"]), (2, 0, [2, "t"])] == sorted(result)


def test_model_release_of_unknown_version_raises():
    m = ModelMap()
    m.snapshot()
    with pytest.raises(ModelReleaseError):
        m.release_snapshot_version(5)


def test_model_release_twice_through_the_snapshot_is_a_no_op():
    m = ModelMap()
    s1 = m.snapshot()
    s2 = m.snapshot()
    s2.release()
    s2.release()
    assert s2.released
    assert 1 == m.required_version()
    s1.release()
    assert 0 == m.required_version()


def test_model_live_iteration_fails_fast_after_insert_of_new_key():
    m = filled_model()
    it = iter(m)
    next(it)
    m.put(100, 0, [100])
    with pytest.raises(ModelConcurrentModification):
        next(it)


def test_model_live_iteration_fails_fast_after_remove():
    m = filled_model()
    it = iter(m)
    next(it)
    m.remove(3, 0)
    with pytest.raises(ModelConcurrentModification):
        next(it)


def test_model_live_iteration_survives_value_updates_and_changes_after_last_element():
    m = filled_model()
    it = iter(m)
    next(it)
    m.put(1, 0, ["updated"])
    rest = [next(it) for _ in range(3)]
    m.put(100, 0, [100])
    assert [] == list(it)
    assert 3 == len(rest)


def test_model_keys_returns_an_iterator_and_size_of_namespace_counts():
    m = filled_model()
    m.put(1, 7, [1])
    keys = m.keys(0)
    assert iter(keys) is keys
    assert [0, 1, 2, 3] == sorted(keys)
    assert (4, 1) == (m.size_of_namespace(0), m.size_of_namespace(7))
