"""The oracle of operator state: what each parallel instance's states hold, what a checkpoint must restore.

A job of ``parallelism`` instances, each with the same registered states
(:class:`OperatorStateSpec`: a name, a mode, element or key/value types). The
model holds plain Python values (lists of elements, dicts), its own deep
copies, and applies each call as the release's Flink does (:data:`NULL_POLICIES`:
what a call with a None does, from each release's bytecode). ``freeze`` is a
checkpoint's synchronous part; :meth:`OperatorModel.restore_expectation` says
what instances restored from it at a parallelism must hold:

- a SPLIT_DISTRIBUTE list: over all instances, exactly the multiset of every
  old instance's elements (which instance gets which is the repartitioner's
  choice); at the same parallelism each instance gets its own list back, in
  order; at another, the instances' sizes are ``total // new`` or one more;
- a UNION list: every instance gets every old instance's elements (a multiset);
- a BROADCAST map: instance ``i`` gets old instance ``i % old``'s map.

``writable`` says whether a checkpoint can write a frozen job: a None that its
serializer cannot write (int and long elements, keys and values; a list
element or value, or a None inside one) fails the checkpoint, in its synchronous
or its asynchronous part.

>>> m = OperatorModel([OperatorStateSpec("ids", "SPLIT_DISTRIBUTE", "int")], 2)
>>> m.call(0, "ids", "add_all", [1, 2, 3]), m.call(1, "ids", "add", 4), m.call(1, "ids", "add", None)
((False, None), (False, None), (True, None))
>>> frozen = m.freeze(); e = m.restore_expectation(frozen, 3)
>>> sorted(e.split_total["ids"]), e.split_sizes["ids"]
([1, 2, 3, 4], [1, 1, 2])
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Optional

import attrs

__all__ = ["OperatorStateSpec", "OperatorModel", "Expectation", "NULL_POLICIES", "null_policy", "writable_value",
           "canonical"]

SPLIT_DISTRIBUTE, UNION, BROADCAST = "SPLIT_DISTRIBUTE", "UNION", "BROADCAST"
# Types whose serializer writes a None (Flink's StringSerializer writes null as length 0).
_NULL_WRITABLE = frozenset({"string"})


@attrs.frozen
class OperatorStateSpec:
    """A registered operator state: ``kind`` an element type (list states) or ``key_type``/``kind`` (broadcast:
    ``kind`` is the value type). Types: ``int``, ``long``, ``string``, ``list`` (a list of ints, mutable)."""

    name: str
    mode: str
    kind: str
    key_type: Optional[str] = None

    @property
    def broadcast(self) -> bool:
        return self.mode == BROADCAST


# What a call with a None does, per release (bytecode: PartitionableListState.addAll gained its checks in 1.19.0;
# HeapBroadcastState is a plain HashMap in every release). An outcome: (raises?, effect) where effect names what
# happens to the state: "none", "clear", "prefix" (the values before the first None added), "all".
NULL_POLICIES = {
    "1.19.0": {"add": (True, "none"), "add_all:null": (True, "none"), "add_all:holds": (True, "prefix"),
               "update:null": (True, "clear"), "update:holds": (True, "clear+prefix"), "put_all:null": (True, "none")},
    "1.13.6": {"add": (True, "none"), "add_all:null": (False, "none"), "add_all:holds": (False, "all"),
               "update:null": (False, "clear"), "update:holds": (False, "clear+all"), "put_all:null": (True, "none")},
}


def null_policy(release: str) -> dict:
    """The null policy of ``release`` (``"2.3.0"``, ``"1.18.1"``...)."""
    parts = tuple(int(p) for p in release.split(".")[:3])
    return NULL_POLICIES["1.19.0" if parts >= (1, 19, 0) else "1.13.6"]


def writable_value(kind: str, value) -> bool:
    """Whether a serializer of ``kind`` writes ``value`` (and copies it, for a list)."""
    if value is None:
        return kind in _NULL_WRITABLE
    if kind == "list":
        return all(v is not None for v in value)
    return True


def canonical(value):
    """An order-free, hashable form of a state's value (for multisets of elements)."""
    if isinstance(value, list):
        return ("list", tuple(value))
    return value


@attrs.define
class Expectation:
    """What instances restored from a frozen job at a parallelism must hold (see the module docstring)."""

    old_parallelism: int
    new_parallelism: int
    split_total: dict  # name -> Counter of canonical elements over all instances
    split_exact: Optional[list]  # per new instance: name -> list (same parallelism), else None
    split_sizes: dict  # name -> the sorted sizes the instances' lists must have
    union: dict  # name -> Counter every instance must hold
    broadcast: list  # per new instance: name -> dict


class OperatorModel:
    """See the module docstring. ``instances[i][name]``: a list (list states) or a dict (broadcast)."""

    def __init__(self, specs, parallelism: int, release: str = "2.3.0") -> None:
        self.specs = {s.name: s for s in specs}
        self.policy = null_policy(release)
        self.instances = [self._empty() for _ in range(parallelism)]

    def _empty(self) -> dict:
        return {name: ({} if spec.broadcast else []) for name, spec in self.specs.items()}

    @property
    def parallelism(self) -> int:
        return len(self.instances)

    # ------------------------------------------------------------ calls

    def call(self, instance: int, name: str, op: str, *args):
        """Apply ``op`` (``add``, ``add_all``, ``update``, ``clear``, ``put``, ``put_all``, ``remove``, ``mutate``)
        to the model: ``(raises, answer)`` (answer: None for writes)."""
        state = self.instances[instance][name]
        args = copy.deepcopy(args)
        if op == "add":
            if args[0] is None:
                return self._effect(state, self.policy["add"], args[0])
            state.append(args[0])
        elif op in ("add_all", "update"):
            values = args[0]
            if values is None:
                return self._effect(state, self.policy[f"{op}:null"], values)
            if any(v is None for v in values):
                return self._effect(state, self.policy[f"{op}:holds"], values)
            if op == "update":
                state.clear()
            state.extend(values)
        elif op == "clear":
            state.clear()
        elif op == "put":
            state[args[0]] = args[1]
        elif op == "put_all":
            if args[0] is None:
                return self._effect(state, self.policy["put_all:null"], None)
            state.update(args[0])
        elif op == "remove":
            state.pop(args[0], None)
        elif op == "mutate":  # an element (list states) or value (broadcast) changed in place: appended to
            where, value = args  # a list's index, or a map's key
            state[where].append(value)
        else:
            raise ValueError(f"no model operation {op!r}")
        return False, None

    @staticmethod
    def _effect(state: list, outcome: tuple, values):
        raises, effect = outcome
        if effect.startswith("clear"):
            state.clear()
        if effect.endswith("prefix"):
            for v in values:
                if v is None:
                    break
                state.append(v)
        elif effect.endswith("all"):
            state.extend(values)
        return raises, None

    def read(self, instance: int, name: str, op: str, *args):
        """A read: ``get`` (a list state's elements, a broadcast value), ``contains``, ``entries``."""
        state = self.instances[instance][name]
        if op == "get" and not self.specs[name].broadcast:
            return copy.deepcopy(state)
        if op == "get":
            return copy.deepcopy(state.get(args[0]))
        if op == "contains":
            return args[0] in state
        if op == "entries":
            return copy.deepcopy(state)
        raise ValueError(f"no model read {op!r}")

    # ------------------------------------------------------------ checkpoints

    def freeze(self) -> list:
        """A checkpoint's synchronous part: a deep copy of every instance's states."""
        return copy.deepcopy(self.instances)

    def writable(self, frozen: list) -> bool:
        """Whether every instance's checkpoint of ``frozen`` can be written (see the module docstring)."""
        for states in frozen:
            for name, value in states.items():
                spec = self.specs[name]
                if spec.broadcast:
                    if any(not writable_value(spec.key_type, k) or not writable_value(spec.kind, v)
                           for k, v in value.items()):
                        return False
                elif any(not writable_value(spec.kind, v) for v in value):
                    return False
        return True

    def restore_expectation(self, frozen: list, new_parallelism: int) -> Expectation:
        old = len(frozen)
        split_total, split_sizes, union = {}, {}, {}
        for name, spec in self.specs.items():
            if spec.broadcast:
                continue
            total = Counter(canonical(v) for states in frozen for v in states[name])
            if spec.mode == SPLIT_DISTRIBUTE:
                split_total[name] = total
                n = sum(total.values())
                base, rest = divmod(n, new_parallelism)
                split_sizes[name] = sorted([base + 1] * rest + [base] * (new_parallelism - rest))
            else:
                union[name] = total
        exact = None
        if new_parallelism == old:
            exact = [{n: copy.deepcopy(s[n]) for n in split_total} for s in frozen]
        broadcast = [{n: copy.deepcopy(frozen[i % old][n]) for n, spec in self.specs.items() if spec.broadcast}
                     for i in range(new_parallelism)]
        return Expectation(old, new_parallelism, split_total, exact, split_sizes, union, broadcast)

    def recover(self, restored: list) -> None:
        """Go on from restored instances (their states as read back, checked against an expectation)."""
        self.instances = copy.deepcopy(restored)
