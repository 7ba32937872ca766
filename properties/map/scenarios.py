"""The docs/contract.md §13 map scenarios, and how a step is classified into them.

Classification of keyed operations is white-box: it predicts, without
touching the map, where the entry will be once the operation has done its
one incremental-rehash step (which may move the entry's bucket and copy
entries), and which versions the chain then carries.
"""

from __future__ import annotations

from cowcheck.reference.layout import MIN_TRANSFERRED_PER_INCREMENTAL_REHASH

__all__ = ["MAP_SCENARIOS", "BLACK_BOX_SCENARIOS", "classify_keyed", "classify_snapshot", "classify_release"]

MAP_SCENARIOS: dict[str, str] = {
    "put-empty-bucket": "put into an empty bucket",
    "put-chain-head": "put at head of a non-empty chain",
    "update-head-snap": "update of a head entry with a live snapshot",
    "update-head-nosnap": "update of a head entry without a live snapshot",
    "update-middle-snap": "update of a middle entry with a live snapshot",
    "update-middle-nosnap": "update of a middle entry without a live snapshot",
    "update-tail-snap": "update of a tail entry with a live snapshot",
    "update-tail-nosnap": "update of a tail entry without a live snapshot",
    "get-middle-copies-prefix": "get of a middle entry that copies the prefix",
    "get-copied-entry-old-state": "get of an entry copied before but with an old state",
    "remove-head": "remove of a head entry",
    "remove-middle": "remove of a middle entry",
    "remove-tail": "remove of a tail entry",
    "remove-prev-old": "remove with prev older than the newest snapshot",
    "remove-prev-new": "remove with prev newer than the newest snapshot",
    "snapshot-not-rehashing": "snapshot while not rehashing",
    "snapshot-rehashing-all-regions": "snapshot while rehashing, all three array regions non-empty",
    "rehash-step-copies": "rehash step that copies old entries",
    "rehash-finish-under-snapshot": "rehash finishing while a snapshot is live",
    "release-oldest-of-2": "two overlapping snapshots, older released first",
    "release-newest-of-2": "two overlapping snapshots, newer released first",
    "release-oldest-of-3": "three overlapping snapshots, oldest released first",
    "release-middle-of-3": "three overlapping snapshots, middle released first",
    "release-newest-of-3": "three overlapping snapshots, newest released first",
    "mutate-returned-under-snapshot": "in-place mutation of a returned value while a snapshot is live",
    "transform-under-snapshot": "transform under a snapshot",
}

# Scenarios the black-box harness can see without introspection.
BLACK_BOX_SCENARIOS = (
    "release-oldest-of-2", "release-newest-of-2", "release-oldest-of-3",
    "release-middle-of-3", "release-newest-of-3", "mutate-returned-under-snapshot",
    "transform-under-snapshot",
)


def _chain(head) -> list:
    out = []
    e = head
    while e is not None:
        out.append(e)
        e = e.next
    return out


def _predict(view, h: int):
    """Chain (list of ``(key, namespace, entry_version, state_version)``) that
    hash ``h`` selects after the next keyed operation's rehash step, and
    facts about that step: ``(chain, copied_in_step, finished)``."""
    primary = view.primary_table
    plen = len(primary)
    required = view.highest_required_snapshot_version
    version = view.state_map_version
    if not view.is_rehashing:
        return [(e.key, e.namespace, e.entry_version, e.state_version) for e in _chain(primary[h & (plen - 1)])], False, False
    rehash = view.incremental_rehash_table
    new_mask = len(rehash) - 1
    moved = []
    i = view.rehash_index
    finished = False
    while len(moved) < MIN_TRANSFERRED_PER_INCREMENTAL_REHASH:
        moved.extend(_chain(primary[i]))
        i += 1
        if i == plen:
            finished = True
            break
    copied = any(e.entry_version < required for e in moved)
    if not finished and (h & (plen - 1)) >= i:
        chain = [(e.key, e.namespace, e.entry_version, e.state_version) for e in _chain(primary[h & (plen - 1)])]
        return chain, copied, finished
    idx = h & new_mask
    landed = [e for e in moved if e.hash & new_mask == idx]
    chain = [(e.key, e.namespace, version if e.entry_version < required else e.entry_version, e.state_version)
             for e in reversed(landed)]
    chain += [(e.key, e.namespace, e.entry_version, e.state_version) for e in _chain(rehash[idx])]
    return chain, copied, finished


def classify_keyed(view, op: str, key, namespace, h: int) -> list[str]:
    """Scenarios that keyed operation ``op`` on ``(key, namespace)`` will hit."""
    chain, copied, finished = _predict(view, h)
    required = view.highest_required_snapshot_version
    out = []
    if copied:
        out.append("rehash-step-copies")
    if finished and required > 0:
        out.append("rehash-finish-under-snapshot")
    pos = next((i for i, c in enumerate(chain) if c[0] == key and c[1] == namespace), None)
    where = None
    if pos is not None:
        where = "head" if pos == 0 else ("tail" if pos == len(chain) - 1 else "middle")
    if op in ("put", "put_and_get_old", "transform"):
        if pos is None:
            out.append("put-empty-bucket" if not chain else "put-chain-head")
        else:
            out.append(f"update-{where}-{'snap' if required else 'nosnap'}")
    elif op in ("get", "get_mutate") and pos is not None:
        _, _, ev, sv = chain[pos]
        if sv < required:
            if ev < required and pos > 0 and any(c[2] < required for c in chain[:pos]):
                out.append("get-middle-copies-prefix")
            if ev >= required:
                out.append("get-copied-entry-old-state")
    elif op in ("remove", "remove_and_get_old") and pos is not None:
        out.append(f"remove-{where}")
        if pos > 0 and required:
            out.append("remove-prev-old" if chain[pos - 1][2] < required else "remove-prev-new")
    return out


def classify_snapshot(view) -> list[str]:
    """Scenarios of a snapshot about to be taken."""
    if not view.is_rehashing:
        return ["snapshot-not-rehashing"]
    primary, rehash, ri = view.primary_table, view.incremental_rehash_table, view.rehash_index
    plen = len(primary)
    regions = (primary[ri:], rehash[0:ri], rehash[plen:plen + ri])
    return ["snapshot-rehashing-all-regions"] if all(any(r) for r in regions) else []


def classify_release(live_versions: list[int], version: int) -> list[str]:
    """Scenario of releasing ``version`` while ``live_versions`` (sorted) are live."""
    n = len(live_versions)
    if n < 2 or version not in live_versions:
        return []
    rank = live_versions.index(version)
    if n == 2:
        return ["release-oldest-of-2" if rank == 0 else "release-newest-of-2"]
    if rank == 0:
        return ["release-oldest-of-3"]
    return ["release-newest-of-3" if rank == n - 1 else "release-middle-of-3"]
