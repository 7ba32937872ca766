import json
import os
import subprocess
import sys

import pytest

from cowcheck.reference.hashing import (
    bit_mix,
    composite_hash,
    java_hash_code,
    key_group,
    murmur_hash,
    register_java_hash,
    to_int32,
)


# docs/contract.md §2 test vectors, produced by Flink itself.

def test_bit_mix_matches_flink_vectors():
    assert 1364076727 == bit_mix(1)
    assert -2047822809 == bit_mix(3)


def test_bit_mix_of_zero_is_zero():
    # Why it matters: key == namespace gives composite hash 0, the cheap way to build chains.
    assert 0 == bit_mix(0)
    assert 0 == composite_hash(7, 7)


def test_murmur_hash_matches_flink_vector():
    assert 593689054 == murmur_hash(0)


@pytest.mark.parametrize(
    "key, expected",
    [(0, 94), (1, 86), (42, 29), ("abc", 115)],
)
def test_key_group_matches_flink_vectors(key, expected):
    assert expected == key_group(key, 128)


def test_key_group_is_always_within_range():
    keys = list(range(-500, 500)) + [f"k{i}" for i in range(300)] + [2**40, -(2**63), True, False]
    for max_parallelism in (1, 2, 7, 128, 32768):
        groups = {key_group(k, max_parallelism) for k in keys}
        assert set() == {g for g in groups if not 0 <= g < max_parallelism}


def test_key_group_rejects_non_positive_parallelism():
    with pytest.raises(ValueError):
        key_group(1, 0)


def test_murmur_hash_is_never_negative():
    codes = [0, 1, -1, 2**31 - 1, -(2**31)] + list(range(-2000, 2000, 7))
    assert [] == [c for c in codes if murmur_hash(c) < 0]


# java_hash_code: Java semantics per type.

def test_int_in_int32_range_hashes_to_itself():
    assert [0, 1, -1, 2**31 - 1, -(2**31)] == [java_hash_code(v) for v in (0, 1, -1, 2**31 - 1, -(2**31))]


@pytest.mark.parametrize(
    "value, expected",
    [
        (2**40, 256),
        (-(2**40), -256),
        (2**63 - 1, -(2**31)),
        (-(2**63), -(2**31)),
        (2**31, -(2**31)),
        (-(2**31) - 1, -(2**31)),
    ],
)
def test_int_outside_int32_hashes_like_java_long(value, expected):
    assert expected == java_hash_code(value)


def test_int_beyond_java_long_is_rejected():
    with pytest.raises(ValueError):
        java_hash_code(2**63)


@pytest.mark.parametrize(
    "text, expected",
    [("hello", 99162322), ("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112)],
)
def test_string_hash_matches_java_string_hash_code(text, expected):
    assert expected == java_hash_code(text)


def test_string_hash_wraps_to_int32_like_java():
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE in Java.
    assert -(2**31) == java_hash_code("polygenelubricants")


def test_non_bmp_character_hashes_over_its_two_utf16_code_units():
    high, low = 0xD83D, 0xDE00  # UTF-16 surrogates of U+1F600
    assert 31 * high + low == java_hash_code("\U0001F600")
    assert 1772899 == java_hash_code("\U0001F600")


def test_bool_hashes_like_java_boolean():
    assert (1231, 1237) == (java_hash_code(True), java_hash_code(False))


def test_none_has_no_hash_code():
    with pytest.raises(TypeError):
        java_hash_code(None)


def test_unknown_type_is_rejected_and_message_points_to_register_java_hash():
    class Opaque:
        pass

    with pytest.raises(TypeError) as info:
        java_hash_code(Opaque())
    assert "register_java_hash" in str(info.value)


def test_tuple_is_not_hashed_with_python_hash():
    with pytest.raises(TypeError):
        java_hash_code((1, 2))


def test_register_java_hash_teaches_a_new_type_and_wraps_to_int32():
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    register_java_hash(Point, lambda p: 31 * p.x + p.y)
    assert 31 * 3 + 4 == java_hash_code(Point(3, 4))
    assert to_int32(31 * 2**31 + 1) == java_hash_code(Point(2**31, 1))
    assert bit_mix(java_hash_code(Point(1, 0)) ^ java_hash_code("ns")) == composite_hash(Point(1, 0), "ns")


def test_registered_hash_applies_to_subclasses():
    class Base:
        pass

    class Derived(Base):
        pass

    register_java_hash(Base, lambda _: 17)
    assert 17 == java_hash_code(Derived())


def test_to_int32_wraps_like_a_java_cast():
    assert (-(2**31), -1, 0, 2**31 - 1) == (to_int32(2**31), to_int32(2**32 - 1), to_int32(2**32), to_int32(2**31 - 1))


def test_composite_hash_is_bit_mix_of_xor_of_java_hash_codes():
    assert bit_mix(java_hash_code("user-1") ^ java_hash_code(3)) == composite_hash("user-1", 3)
    assert bit_mix(5 ^ 9) == composite_hash(5, 9)


# Determinism across processes: str hash() is salted, the layout must not be.

_LAYOUT_SCRIPT = """
import json
from cowcheck.reference import CopyOnWriteStateMap
from cowcheck.reference.hashing import composite_hash
keys = [f"user-{i}" for i in range(50)]
m = CopyOnWriteStateMap(capacity=64)
for k in keys:
    m.put(k, "window", 0)
chains = []
for head in m.primary_table:
    chain = []
    e = head
    while e is not None:
        chain.append(e.key)
        e = e.next
    chains.append(chain)
print(json.dumps({
    "buckets": [[k, composite_hash(k, "window") & 63] for k in keys],
    "chains": chains,
    "python_hash": hash("user-0"),
}))
"""


def _layout_in_subprocess(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    result = subprocess.run(
        [sys.executable, "-c", _LAYOUT_SCRIPT], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(result.stdout)


def test_bucket_layout_of_string_keys_is_identical_across_processes_with_different_hash_seeds():
    first = _layout_in_subprocess("0")
    second = _layout_in_subprocess("12345")
    # Guard: the two processes really salt str hash() differently, so a hash() leak would show.
    assert first["python_hash"] != second["python_hash"]
    assert first["buckets"] == second["buckets"]
    assert first["chains"] == second["chains"]
    assert [[f"user-{i}", composite_hash(f"user-{i}", "window") & 63] for i in range(50)] == first["buckets"]


# The memoised twins of the hot path agree with the pure functions (which carry the contracts).
from hypothesis import given, strategies as st  # noqa: E402

from cowcheck.reference import hashing as _hashing  # noqa: E402


@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.booleans()))
def test_java_hash_code_cached_agrees_with_the_pure_hash_cold_and_warm(value):
    want = java_hash_code(value)
    _hashing._STR_CACHE.clear()
    assert want == _hashing.java_hash_code_cached(value)  # cold
    assert want == _hashing.java_hash_code_cached(value)  # warm


@given(st.integers(-(2**31), 2**32 - 1))
def test_bit_mix_cached_agrees_with_bit_mix_cold_and_warm(h):
    _hashing._MIX_CACHE.clear()
    assert bit_mix(h) == _hashing.bit_mix_cached(h) == _hashing.bit_mix_cached(h)
