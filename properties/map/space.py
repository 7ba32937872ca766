"""State-space coverage of the map machine: how large a world a run explored.

Scenario coverage (docs/contract.md §13) says which situations of the structure a run
reached; it says nothing of how big or varied the maps were. A run that
draws int keys 0..31 into maps of a hundred entries reaches every scenario
and still never sees a long key, a fresh key object, a table past a few
hundred buckets or a snapshot held across several rehash generations.
:class:`SpaceCoverage` counts those, per map (a walk or an example) and
summed over a run, cheaply enough for every step:

- the largest map, and how many maps reached each size class;
- rehash generations: table doublings Flink's growth rule (3/4 load, from the
  map's capacity) implies for the sizes reached, the most one map went through,
  and how many began while a snapshot was live — black-box and white-box alike;
- white-box: the table lengths seen and the longest chain a keyed step met;
- the most snapshots alive at once;
- the kinds of keys and namespaces handed to the map (their families and
  magnitudes), and how many were fresh objects and how many the same object again;
  a kind never reached because its family was left out of the run (the map does
  not take it, or ``--key-families``/``--namespace-families`` chose others) says so.

>>> s = SpaceCoverage(); s.record_size(5, 4, live=0); s.record_size(200, 4, live=1); s.finish_map()
>>> s.largest, s.generations, s.under_snapshot
(200, 7, 6)
"""

from __future__ import annotations

from collections import Counter

from cowcheck.map.ops import SIZE_CLASSES

__all__ = ["SpaceCoverage", "size_class_of", "KEY_KINDS", "NAMESPACE_KINDS"]

# What a run should reach (the "never reached" lines name the ones it did not).
KEY_KINDS = ("int, cached by CPython (-5..256)", "int, > 256", "int, negative", "long, beyond int32",
             "string, ASCII", "string, non-ASCII", "string, non-BMP", "string, lone surrogate", "Tuple2")
NAMESPACE_KINDS = ("VoidNamespace", "int, cached by CPython (-5..256)", "TimeWindow")
# The kinds above that each family's values are (docs/contract.md §17), by role.
_FAMILY_KINDS = {
    "key": {"int": KEY_KINDS[:3], "long": KEY_KINDS[3:4], "string": KEY_KINDS[4:8], "tuple": KEY_KINDS[8:]},
    "namespace": {"void": NAMESPACE_KINDS[:1], "int": NAMESPACE_KINDS[1:2], "window": NAMESPACE_KINDS[2:]},
}
_GENERATION_GOALS = (3, 6)  # "through many rehash generations": reached at least this many


def size_class_of(entries: int) -> str:
    """The smallest size class holding ``entries``."""
    for name, bound in SIZE_CLASSES.items():
        if entries <= bound:
            return name
    return "beyond large"


def _threshold(capacity: int) -> int:
    return (capacity >> 1) + (capacity >> 2)


class SpaceCoverage:
    """Counts of the explored state space; :meth:`update` adds another run's."""

    __slots__ = ("maps", "largest", "size_classes", "generations", "generations_total", "under_snapshot",
                 "snapshots_alive", "table_lengths", "longest_chain", "keys", "namespaces", "fresh", "held",
                 "white_box", "left_out", "_largest_here", "_capacity", "_doublings")

    def __init__(self) -> None:
        self.maps = 0
        self.largest = 0
        self.size_classes: Counter = Counter()
        self.generations = 0  # the most doublings one map went through
        self.generations_total = 0
        self.under_snapshot = 0  # doublings that began while a snapshot was live
        self.snapshots_alive = 0
        self.table_lengths: set = set()
        self.longest_chain = 0
        self.keys: Counter = Counter()
        self.namespaces: Counter = Counter()
        self.fresh = 0  # keys and namespaces handed to the map as new objects
        self.held = 0  # ... as the same object again (a caller holding its keys)
        self.white_box = False
        self.left_out: set = set()  # (role, family) of the families the run left out
        self._largest_here = 0
        self._capacity = 0
        self._doublings = 0

    # ------------------------------------------------------------ per step

    def record_size(self, entries: int, capacity: int, live: int) -> None:
        """After a step: the map holds ``entries``, ``live`` snapshots; its capacity started at ``capacity``."""
        if entries > self._largest_here:
            self._largest_here = entries
            if not self._capacity:
                self._capacity = capacity
            while entries > _threshold(self._capacity) and self._capacity < 1 << 30:
                self._capacity <<= 1
                self._doublings += 1
                self.under_snapshot += live > 0
        if live > self.snapshots_alive:
            self.snapshots_alive = live

    @property
    def largest_here(self) -> int:
        """The most entries the map in progress has held."""
        return self._largest_here

    def leave_out(self, role: str, families) -> None:
        """The run draws no ``role`` (``key``, ``namespace``) of the families named ``families``."""
        self.left_out.update((role, name) for name in families)

    def record_keys(self, key_kind: str, namespace_kind: str, count: int = 1) -> None:
        self.keys[key_kind] += count
        self.namespaces[namespace_kind] += count

    def finish_map(self) -> None:
        """One map (a walk, an example) is done: fold its maxima in."""
        self.maps += 1
        here = self._largest_here
        self.largest = max(self.largest, here)
        self.size_classes[size_class_of(here)] += 1
        self.generations = max(self.generations, self._doublings)
        self.generations_total += self._doublings
        self._largest_here = self._capacity = self._doublings = 0

    # ------------------------------------------------------------ runs

    def folded(self) -> "SpaceCoverage":
        """This record with the map in progress counted as one map (a harness's record
        is one map it never finishes itself)."""
        if not (self._largest_here or self._capacity or self._doublings):
            return self
        out = SpaceCoverage()
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(out, name, value.copy() if isinstance(value, (set, Counter)) else value)
        out.finish_map()
        return out

    def update(self, other: "SpaceCoverage") -> None:
        """Add ``other``'s counts (its map in progress counted as finished)."""
        other = other.folded()
        self.maps += other.maps
        self.largest = max(self.largest, other.largest)
        self.size_classes.update(other.size_classes)
        self.generations = max(self.generations, other.generations)
        self.generations_total += other.generations_total
        self.under_snapshot += other.under_snapshot
        self.snapshots_alive = max(self.snapshots_alive, other.snapshots_alive)
        self.table_lengths |= other.table_lengths
        self.longest_chain = max(self.longest_chain, other.longest_chain)
        self.keys.update(other.keys)
        self.namespaces.update(other.namespaces)
        self.fresh += other.fresh
        self.held += other.held
        self.white_box = self.white_box or other.white_box
        self.left_out |= other.left_out

    def to_json(self) -> dict:
        return {"maps": self.maps, "largest": self.largest, "size_classes": dict(sorted(self.size_classes.items())),
                "generations": self.generations, "generations_total": self.generations_total,
                "under_snapshot": self.under_snapshot, "snapshots_alive": self.snapshots_alive,
                "table_lengths": sorted(self.table_lengths), "longest_chain": self.longest_chain,
                "keys": dict(sorted(self.keys.items())), "namespaces": dict(sorted(self.namespaces.items())),
                "fresh": self.fresh, "held": self.held, "white_box": self.white_box,
                **({"left_out": sorted(f"{role}:{name}" for role, name in self.left_out)} if self.left_out else {})}

    @classmethod
    def from_json(cls, data: dict) -> "SpaceCoverage":
        s = cls()
        for name in ("maps", "largest", "generations", "generations_total", "under_snapshot", "snapshots_alive",
                     "longest_chain", "fresh", "held"):
            setattr(s, name, int(data.get(name, 0)))
        s.size_classes = Counter(data.get("size_classes", {}))
        s.table_lengths = set(data.get("table_lengths", ()))
        s.keys = Counter(data.get("keys", {}))
        s.namespaces = Counter(data.get("namespaces", {}))
        s.white_box = bool(data.get("white_box", False))
        s.left_out = {tuple(item.split(":", 1)) for item in data.get("left_out", ()) if ":" in item}
        return s

    def lines(self) -> list[str]:
        """The report: one line per measure, then what was never reached."""
        if not self.maps:
            return []
        out = [f"  maps: {self.maps:,}; largest {self.largest:,} entries; by size class: "
               + ", ".join(f"{name} {self.size_classes.get(name, 0):,}" for name in SIZE_CLASSES),
               f"  rehash generations (table doublings by Flink's growth rule): most in one map "
               f"{self.generations}, {self.generations_total:,} in all, {self.under_snapshot:,} begun under a "
               f"live snapshot",
               f"  snapshots alive at once: at most {self.snapshots_alive}"]
        if self.white_box:
            lengths = sorted(self.table_lengths)
            shown = ", ".join(f"{n:,}" for n in lengths[:3]) + (" … " + f"{lengths[-1]:,}" if len(lengths) > 3 else "")
            out.append(f"  tables seen (white-box): lengths {shown or 'none'}; longest chain {self.longest_chain}")
        total = self.fresh + self.held
        if total:
            out.append(f"  key objects: {self.fresh:,} fresh, {self.held:,} held (the same object again)")
        out.append("  keys: " + (", ".join(f"{k} {v:,}" for k, v in sorted(self.keys.items())) or "none"))
        out.append("  namespaces: " + (", ".join(f"{k} {v:,}" for k, v in sorted(self.namespaces.items())) or "none"))
        missing = [f"size class {name} (<= {bound:,} entries)"
                   + (": campaigns and --profile nightly grow maps this large" if name == "large" else "")
                   for name, bound in SIZE_CLASSES.items() if not self.size_classes.get(name)]
        missing += [f"keys: {kind}{self._why('key', kind)}" for kind in KEY_KINDS if not self.keys.get(kind)]
        missing += [f"namespaces: {kind}{self._why('namespace', kind)}" for kind in NAMESPACE_KINDS
                    if not self.namespaces.get(kind)]
        for goal in _GENERATION_GOALS:
            if self.generations < goal:
                missing.append(f"a map through {goal} rehash generations")
        if not self.under_snapshot:
            missing.append("a rehash begun under a live snapshot")
        if not self.fresh:
            missing.append("fresh key objects")
        if not self.held:
            missing.append("held key objects (the same object again)")
        out += [f"  never reached: {what}" for what in missing]
        return out

    def _why(self, role: str, kind: str) -> str:
        """Why ``kind`` was never reached, when its family was left out of the run."""
        for family, kinds in _FAMILY_KINDS[role].items():
            if kind in kinds and (role, family) in self.left_out:
                return f" (its {role} family, {family}, was left out of the run: docs/contract.md §17)"
        return ""
