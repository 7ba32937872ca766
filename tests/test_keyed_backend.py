"""The reference keyed backend at the state level (reference/keyed) and its model (model/keyed_model.py)."""

import pytest

from cowcheck.model.keyed_model import KeyedModel, StateSpec
from cowcheck.reference.checkpoint import CheckpointStreamFactory
from cowcheck.reference.keyed import (ON_READ_AND_WRITE, HashMapStateBackend, ListStateDescriptor, ManualClock,
                             MapStateDescriptor, ReducingStateDescriptor, StateMigrationError, StateTtlConfig,
                             ValueStateDescriptor)
from cowcheck.reference.serializers import IntSerializer, LongSerializer, TtlSerializer, TtlValue, serializer_from_id
from cowcheck.reference.state_table import KeyGroupRange

INT = IntSerializer()
WHOLE = KeyGroupRange(0, 7)


def backend(clock=None):
    return HashMapStateBackend(clock=clock or ManualClock(), capacity=4)


def ttl(descriptor, millis=10, update_type="OnCreateAndWrite"):
    descriptor.enable_time_to_live(StateTtlConfig(millis, update_type))
    return descriptor


def state(kb, descriptor, key=1, namespace=0):
    s = kb.get_or_create_keyed_state(INT, descriptor)
    kb.set_current_key(key)
    s.set_current_namespace(namespace)
    return s


def test_value_update_with_null_removes_the_entry_and_its_key():
    kb = backend().create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ValueStateDescriptor("v", INT))
    s.update(7)
    assert s.value() == 7 and list(kb.get_keys("v", 0)) == [1]
    s.update(None)
    assert s.value() is None and list(kb.get_keys("v", 0)) == []


def test_list_update_with_nothing_and_the_last_map_key_removed_remove_the_entry():
    kb = backend().create_keyed_state_backend(INT, 8, WHOLE)
    lst, mp = state(kb, ListStateDescriptor("l", INT)), state(kb, MapStateDescriptor("m", INT, INT))
    lst.add(1)
    mp.put(2, 3)
    lst.update([])
    mp.remove(2)
    assert lst.get() is None and mp.entries() is None
    assert list(kb.get_keys("l", 0)) == [] and list(kb.get_keys("m", 0)) == []


def test_a_ttl_value_expires_at_its_write_time_plus_ttl_and_a_read_then_removes_it():
    clock = ManualClock(100)
    kb = backend(clock).create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(ValueStateDescriptor("v", INT)))
    s.update(5)
    clock.advance(9)
    assert s.value() == 5
    clock.advance(1)
    assert list(kb.get_keys("v", 0)) == [1]  # expired, not cleaned up yet: iteration reads no state
    assert s.value() is None
    assert list(kb.get_keys("v", 0)) == []


def test_on_read_and_write_renews_what_a_read_returns():
    clock = ManualClock()
    kb = backend(clock).create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(ValueStateDescriptor("v", INT), update_type=ON_READ_AND_WRITE))
    s.update(5)
    clock.advance(8)
    assert s.value() == 5
    clock.advance(8)
    assert s.value() == 5  # 16 ms after the write, 8 after the read


def test_a_ttl_list_expires_element_by_element_and_answers_an_empty_list():
    clock = ManualClock()
    kb = backend(clock).create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(ListStateDescriptor("l", INT)))
    s.add(1)
    clock.advance(5)
    s.add(2)
    clock.advance(5)
    assert s.get() == [2]
    clock.advance(5)
    assert s.get() == [] and list(kb.get_keys("l", 0)) == []


def test_a_ttl_map_iteration_removes_expired_keys_and_may_leave_an_empty_map():
    clock = ManualClock()
    kb = backend(clock).create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(MapStateDescriptor("m", INT, INT)))
    s.put(1, 10)
    clock.advance(10)
    assert s.entries() == []
    assert list(kb.get_keys("m", 0)) == [1]  # the empty map stays, as Flink's iterator leaves it
    s.remove(3)
    assert list(kb.get_keys("m", 0)) == []  # removing from an empty map removes it


def test_a_ttl_reducing_state_starts_again_after_its_accumulator_expired():
    clock = ManualClock()
    kb = backend(clock).create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(ReducingStateDescriptor("r", lambda a, b: a + b, INT)))
    s.add(2)
    s.add(3)
    assert s.get() == 5
    clock.advance(10)
    s.add(4)
    assert s.get() == 4


def test_a_checkpoint_keeps_what_its_synchronous_part_saw_while_its_asynchronous_part_runs_on_a_thread():
    kb = backend().create_keyed_state_backend(INT, 8, WHOLE)
    lst = state(kb, ListStateDescriptor("l", INT))
    for key in range(50):
        kb.set_current_key(key)
        lst.add(key)
    future = kb.snapshot(1, CheckpointStreamFactory())
    future.start()
    for key in range(50):
        kb.set_current_key(key)
        lst.add(-1)
    handle = future.get(10)
    restored = backend().create_keyed_state_backend(INT, 8, WHOLE, [handle])
    r = restored.get_or_create_keyed_state(INT, ListStateDescriptor("l", INT))
    r.set_current_namespace(0)
    for key in range(50):
        restored.set_current_key(key)
        assert r.get() == [key]


def test_a_checkpoint_leaves_out_what_had_expired_and_restores_into_parts_and_merged():
    clock = ManualClock()
    hb = backend(clock)
    kb = hb.create_keyed_state_backend(INT, 8, WHOLE)
    s = state(kb, ttl(ValueStateDescriptor("v", INT)))
    for key in range(20):
        kb.set_current_key(key)
        s.update(key)
    clock.advance(5)
    kb.set_current_key(3)
    s.update(33)
    clock.advance(5)  # every key but 3 has expired
    handle = kb.snapshot(1).run()
    parts = [hb.create_keyed_state_backend(INT, 8, r, [handle]) for r in (KeyGroupRange(0, 3), KeyGroupRange(4, 7))]
    keys = [set(p.get_keys("v", 0)) for p in parts]
    assert keys[0] | keys[1] == {3} and not keys[0] & keys[1]
    merged = hb.create_keyed_state_backend(INT, 8, WHOLE, [p.snapshot(2).run() for p in parts])
    m = state(merged, ttl(ValueStateDescriptor("v", INT)), key=3)
    assert m.value() == 33


def test_a_restored_state_registered_with_an_incompatible_serializer_is_refused_and_ttl_switched_on_migrates():
    kb = backend().create_keyed_state_backend(INT, 8, WHOLE)
    state(kb, ValueStateDescriptor("v", INT)).update(1)
    handle = kb.snapshot(1).run()
    restored = backend().create_keyed_state_backend(INT, 8, WHOLE, [handle])
    with pytest.raises(StateMigrationError):
        restored.get_or_create_keyed_state(INT, ValueStateDescriptor("v", LongSerializer()))
    migrated = backend().create_keyed_state_backend(INT, 8, WHOLE, [handle])
    assert state(migrated, ttl(ValueStateDescriptor("v", INT))).value() == 1  # Flink 2.x: TTL state migration


def test_ttl_values_serialize_as_flinks_composite_of_timestamp_and_value():
    assert serializer_from_id("list<ttl<long>>").serializer_id == "list<ttl<long>>"
    import io

    out = io.BytesIO()
    TtlSerializer(LongSerializer()).serialize(TtlValue(7, 3), out)
    assert out.getvalue() == (3).to_bytes(8, "big") + (7).to_bytes(8, "big")


def test_the_future_of_an_asynchronous_part_is_joined_once_and_says_when_it_is_done():
    kb = backend().create_keyed_state_backend(INT, 8, WHOLE)
    future = kb.snapshot(1)
    assert not future.done
    future.start()
    handle = future.get(10)
    assert future.done and future.get() is handle
    with pytest.raises(RuntimeError, match="already started"):
        future.start()


# ------------------------------------------------------------------ the model


def test_the_model_bounds_key_iteration_between_what_shows_and_what_may_be_left():
    m = KeyedModel([StateSpec("v", "value", ttl=10), StateSpec("w", "value")])
    m.update("v", 1, 0, 5)
    m.update("w", 2, 0, 5)
    m.advance(10)
    assert m.key_bounds("v", 0) == (set(), {1})
    assert m.key_bounds("w", 0) == ({2}, {2})
    m.update("w", 2, 0, None)
    assert m.key_bounds("w", 0) == (set(), set())


def test_a_frozen_copy_shows_what_the_checkpoint_held_at_any_later_time():
    m = KeyedModel([StateSpec("l", "list", ttl=10, update_on_read=True)])
    m.list_add("l", 1, 0, 7)
    m.advance(5)
    frozen = m.freeze()
    m.list_add("l", 1, 0, 8)
    assert frozen.visible("l", 1, 0, 9) == [7] and frozen.visible("l", 1, 0, 10) is None
    assert frozen.may_keys("l", 0, lambda key: True) == {1}
