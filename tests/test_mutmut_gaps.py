"""Tests that close gaps found by mutation testing of reference/cow_state_map.py.

Each test names the mutmut mutant(s) it kills (``cowcheck.reference.cow_state_map.``
prefix left out); docs/mutmut.md explains every surviving mutant and how this
file answers the ones that were real gaps. Mutant numbers are those of the
mutmut run recorded there (reference at commit 859f769).
"""

from __future__ import annotations

from cowcheck.reference import CopyOnWriteStateMap, StateMapEntry
from cowcheck.reference.hashing import composite_hash
from cowcheck.reference.layout import uses_primary_table


def chain(head) -> list:
    out = []
    while head is not None:
        out.append(head)
        head = head.next
    return out


def rehashing_map():
    """capacity-128 map in the middle of a rehash (0 < rehash_index < 128)."""
    m = CopyOnWriteStateMap(capacity=128)
    for k in range(98):
        m.put(k, 1000, [k])
    for _ in range(5):
        m.contains_key(-1, -1)
    assert m.is_rehashing and 0 < m.rehash_index < 128
    return m


# ------------------------------------------------ StateMapEntry copy constructor

def test_copy_with_version_copies_every_field_and_shares_state_and_next():
    """docs/contract.md §3: the copy constructor ``(other, entry_version)`` copies key,
    namespace, the state *reference*, hash, next and state_version.
    Kills xǁStateMapEntryǁcopy_with_version__mutmut_1..7."""
    state, tail = [1, 2], StateMapEntry("t", "ns", [0], 5, None, 1, 1)
    e = StateMapEntry("k", "ns", state, 42, tail, 1, 3)
    c = e.copy_with_version(7)
    assert c is not e
    assert ("k", "ns", 42, 7, 3) == (c.key, c.namespace, c.hash, c.entry_version, c.state_version)
    assert c.state is state
    assert c.next is tail
    # the original is untouched
    assert ("k", "ns", 42, 1, 3) == (e.key, e.namespace, e.hash, e.entry_version, e.state_version)


# ------------------------------------------------------------ small helpers

def test_is_empty_follows_inserts_and_removes():
    """Kills xǁCopyOnWriteStateMapǁis_empty__mutmut_1/2 (no test called it)."""
    m = CopyOnWriteStateMap(capacity=4)
    assert m.is_empty()
    m.put(1, 0, [1])
    assert not m.is_empty()
    m.put(2, 0, [2])
    m.remove(1, 0)
    assert not m.is_empty()
    m.remove(2, 0)
    assert m.is_empty()


def test_select_active_table_picks_the_table_that_holds_the_entry():
    """docs/contract.md §4 select_active_table, on a map mid-rehash: every entry sits in
    the table the helper picks; buckets below rehash_index go to the new table.
    Kills xǁCopyOnWriteStateMapǁ_select_active_table__mutmut_1..9."""
    m = rehashing_map()
    plen = len(m.primary_table)
    for table in (m.primary_table, m.incremental_rehash_table):
        for head in table:
            for e in chain(head):
                assert m._select_active_table(e.hash) is table
                assert (table is m.primary_table) == uses_primary_table(e.hash, plen, m.rehash_index)
    # a hash whose primary bucket equals rehash_index has not moved yet
    h = next(h for h in range(1 << 12) if h & (plen - 1) == m.rehash_index)
    assert m._select_active_table(h) is m.primary_table
    assert m._select_active_table(m.rehash_index - 1) is m.incremental_rehash_table
    still = CopyOnWriteStateMap(capacity=4)
    assert all(still._select_active_table(h) is still.primary_table for h in range(-8, 8))


def test_repr_names_size_capacity_rehashing_version_and_live_snapshots():
    """Kills xǁCopyOnWriteStateMapǁ__repr____mutmut_1 (no test called repr)."""
    m = CopyOnWriteStateMap(capacity=4)
    m.put(1, 0, [1])
    s1 = m.snapshot()
    m.snapshot()
    s1.release()
    assert "CopyOnWriteStateMap(size=1, capacity=4, rehashing=False, version=2, live_snapshots=[2])" == repr(m)


# ------------------------------------------------------ incremental visitor

def visit_calls(visitor) -> list:
    calls = []
    while visitor.has_next():
        calls.append(visitor.next_entries())
        assert len(calls) < 10_000
    return calls


def test_incremental_visitor_sees_the_only_entry_of_a_map():
    """A map with exactly one entry still has something to visit.
    Kills xǁ_ChainIteratorǁhas_next__mutmut_4 (``len(m) > 1``)."""
    m = CopyOnWriteStateMap(capacity=4)
    m.put(7, 0, [7])
    assert [(7, 0, [7])] == [entry for call in visit_calls(m.incremental_visitor(4)) for entry in call]


def test_incremental_visitor_scans_at_most_n_empty_buckets_per_call():
    """docs/contract.md §7: the visitor scans at most ``recommended_max_records`` empty
    buckets per call, so a call may return nothing. One entry in bucket b of
    a table of 16: with N=1 the first b calls return [], call b+1 the chain.
    Kills xǁStateIncrementalVisitorǁ__init____mutmut_6 (N dropped) and
    xǁ_ChainIteratorǁ_scan__mutmut_6/12/13/14 (empty buckets miscounted)."""
    key = next(k for k in range(1, 1000) if composite_hash(k, 0) & 15 == 9)
    m = CopyOnWriteStateMap(capacity=16)
    m.put(key, 0, [key])
    calls = visit_calls(m.incremental_visitor(1))
    assert [[]] * 9 + [[(key, 0, [key])]] == calls[:10]
    assert all(c == [] for c in calls[10:])
    calls = visit_calls(m.incremental_visitor(4))
    assert [[], [], [(key, 0, [key])]] == calls[:3]
    assert [[(key, 0, [key])]] == visit_calls(m.incremental_visitor(16))[:1]


def test_incremental_visitor_never_walks_a_rehash_table_started_after_the_primary_was_swapped():
    """docs/contract.md §7: the chain iterator walks the primary captured at start, then
    the current rehash table *only if the primary has not been swapped*. A
    visitor started on table P, after a rehash finished (P swapped out) and a
    second one started (table T2 filling), ends: P's buckets are all empty and
    T2 belongs to a later table generation.
    Kills xǁ_ChainIteratorǁnext_head__mutmut_4."""
    m = CopyOnWriteStateMap(capacity=4)
    for k in range(3):
        m.put(k, 0, [k])
    visitor = m.incremental_visitor(1)
    first = m.primary_table
    k = 3
    while m.primary_table is first or m.is_rehashing:  # start and finish the first rehash
        m.put(k, 0, [k])
        k += 1
    while not m.is_rehashing:  # start the second one
        m.put(k, 0, [k])
        k += 1
    m.contains_key(-1, -1)  # one step: entries land in the second rehash table
    assert any(h is not None for h in m.incremental_rehash_table)
    seen = [entry for call in visit_calls(visitor) for entry in call]
    assert [] == seen


# ------------------------------------------------------------ live iterator

def test_concurrent_modification_error_carries_expected_and_actual_mod_counts():
    """errors.py: exceptions carry the pieces of their message as attributes.
    Kills xǁStateEntryIteratorǁ__next____mutmut_4/5."""
    m = CopyOnWriteStateMap(capacity=8)
    for k in range(3):
        m.put(k, 0, [k])
    before = m.mod_count
    it = iter(m)
    next(it)
    m.put(99, 0, [99])
    m.remove(0, 0)
    try:
        next(it)
    except RuntimeError as exc:
        assert (before, before + 2) == (exc.expected_mod_count, exc.actual_mod_count)
        assert f"mod_count {before} -> {before + 2}" in str(exc)
    else:
        raise AssertionError("no ConcurrentModificationError after a structural change")


# ----------------------------------------------- hashing on a bit_mix memo miss

def test_every_keyed_operation_hashes_correctly_on_a_memo_miss():
    """The int32 fast path of get/put/_put_entry/_remove_entry/_hash_of looks
    the mix up in a memo and computes it on a miss. Under pytest the memo is
    warm (every earlier test filled it), so the miss branch was never checked:
    clear the memo before every operation and check results and stored hashes
    against the uncached Java arithmetic.
    Kills x__hash_of__mutmut_16..19 and the ``if h is None`` branch mutants
    of get, put, _put_entry and _remove_entry."""
    from cowcheck.reference.hashing import _MIX_CACHE, bit_mix
    from cowcheck.reference.invariants import check_structure

    def fresh(op, *args):
        _MIX_CACHE.clear()
        result = op(*args)
        for table in (m.primary_table, m.incremental_rehash_table):
            for head in table:
                for e in chain(head):
                    assert bit_mix(e.key ^ e.namespace) == e.hash
        return result

    m = CopyOnWriteStateMap(capacity=4)
    keys = [(k * 7919 + 13, k % 3) for k in range(12)]  # enough to start and run a rehash
    for i, (k, n) in enumerate(keys):
        if i % 3 == 0:
            fresh(m.put, k, n, [k])
        elif i % 3 == 1:
            assert fresh(m.put_and_get_old, k, n, [k]) is None
        else:
            fresh(m.transform, k, n, k, lambda old, v: [v])
    m.snapshot()  # copy-on-write paths too
    for k, n in keys:
        assert fresh(m.contains_key, k, n)
        assert not fresh(m.contains_key, k, n + 100)
        assert [k] == fresh(m.get, k, n)
        assert [k] == fresh(m.put_and_get_old, k, n, [k, 1])
        fresh(m.transform, k, n, 2, lambda old, v: old + [v])
        fresh(m.put, k, n, fresh(m.get, k, n) + [3])
        assert [k, 1, 2, 3] == fresh(m.get, k, n)
    assert [] == check_structure(m)
    for i, (k, n) in enumerate(keys):
        if i % 2:
            assert [k, 1, 2, 3] == fresh(m.remove_and_get_old, k, n)
        else:
            fresh(m.remove, k, n)
        assert not fresh(m.contains_key, k, n)
    assert 0 == len(m)


# ------------------------------------------------------------- copy-on-write

def collided_map():
    """capacity-4 map whose bucket 0 holds the chain 3 -> 2 -> 1 (key == namespace hashes to 0)."""
    m = CopyOnWriteStateMap(capacity=4)
    for k in (1, 2, 3):
        m.put(k, k, [k])
    return m


def same_objects(left, right) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right))


def test_chained_copy_reuses_middle_entries_already_copied_for_the_newest_snapshot():
    """docs/contract.md §4, chained copy-on-write: entries already newer are reused — not
    just the head. Chain 3 -> 2 -> 1 under a snapshot: writing 2 copies 3 and
    2; writing 1 afterwards must reuse both copies and copy only 1.
    Kills xǁCopyOnWriteStateMapǁ_chained_copy_on_write__mutmut_24 (``<=``)."""
    m = collided_map()
    s = m.snapshot()
    m.put(2, 2, [20])
    new3, new2, old1 = chain(m.primary_table[0])
    m.put(1, 1, [10])
    after = chain(m.primary_table[0])
    assert after[0] is new3 and after[1] is new2
    assert after[2] is not old1
    assert [(3, 3, [3]), (2, 2, [2]), (1, 1, [1])] == list(s)
    # remove goes through the same walk: prev (2') is newer, rewritten in place
    m.remove(1, 1)
    assert same_objects([new3, new2], chain(m.primary_table[0]))


def test_foreign_snapshot_error_names_the_snapshot_version():
    """errors.py: ForeignSnapshotError carries the version it refused.
    Kills xǁCopyOnWriteStateMapǁrelease_snapshot__mutmut_2."""
    from cowcheck.reference.errors import ForeignSnapshotError

    m, other = CopyOnWriteStateMap(capacity=4), CopyOnWriteStateMap(capacity=4)
    m.snapshot()
    s = m.snapshot()
    try:
        other.release_snapshot(s)
    except ForeignSnapshotError as exc:
        assert 2 == exc.version
        assert "version 2" in str(exc)
    else:
        raise AssertionError("releasing another map's snapshot did not raise")


def test_rehash_moves_entries_created_after_the_newest_snapshot_without_copying():
    """docs/contract.md §5: a rehash step copies a moved entry only if its entry_version
    < R; entries created after the newest snapshot move as they are (same
    objects, same versions), so nothing is copied twice.
    Kills xǁCopyOnWriteStateMapǁ_incremental_rehash__mutmut_12 (``<=``)."""
    m = CopyOnWriteStateMap(capacity=4)
    s = m.snapshot()
    for k in range(5):  # the 5th insert starts the rehash
        m.put(k, 0, [k])
    assert m.is_rehashing
    before = {e.key: e for e in m.entries()}
    assert {1} == {e.entry_version for e in before.values()} == {m.highest_required_snapshot_version}
    while m.is_rehashing:
        m.contains_key(-1, -1)
    after = {e.key: e for e in m.entries()}
    assert before.keys() == after.keys()
    assert all(after[k] is before[k] for k in before)
    assert {1} == {e.entry_version for e in after.values()}
    s.release()


def test_mod_count_starts_at_0_and_counts_each_structural_change_once():
    """docs/contract.md §3/§4: mod_count (a white-box field, also reported by
    ConcurrentModificationError) is 0 for a new map and grows by exactly one
    per insert of a new key and per remove; updates, reads, copy-on-write,
    rehash steps, snapshots and removes of absent keys leave it alone.
    Kills xǁCopyOnWriteStateMapǁ__init____mutmut_17, _insert_entry__mutmut_2/3
    and _remove_entry__mutmut_62/63."""
    m = CopyOnWriteStateMap(capacity=4)
    assert 0 == m.mod_count
    for k in range(6):  # the 5th insert starts a rehash
        m.put(k, 0, [k])
        assert k + 1 == m.mod_count
    m.put_and_get_old(6, 0, [6])
    m.transform(7, 0, 7, lambda old, v: [v])
    assert 8 == m.mod_count
    s = m.snapshot()
    m.put(0, 0, [0, 0])
    m.get(1, 0)
    m.transform(2, 0, 1, lambda old, v: old + [v])
    m.contains_key(-1, -1)
    m.remove(99, 0)
    assert None is m.remove_and_get_old(98, 0)
    assert 8 == m.mod_count
    m.remove(3, 0)
    assert [4] == m.remove_and_get_old(4, 0)
    assert 10 == m.mod_count
    s.release()
