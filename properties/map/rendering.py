"""A failing map program as literal Python that fails by itself when pasted.

``cowcheck check`` prints the shrunk program and ``replay --to-pytest`` writes it
into a test; in both it is the program the harness ran, spelt out:

- keys and namespaces the harness handed the map as fresh objects are written
  ``fresh(1000)`` (a literal ``1000`` written twice in one module is one
  object, which hides a map that compares keys by identity); values CPython
  keeps one object of (small ints, ``''``, one Latin-1 character) and keys
  after a ``hold_keys`` step are written plainly;
- no hidden clamping: a live iteration's position is the number of entries the
  harness read;
- under ``--contract isolation`` the old states the harness changed in place
  are changed in the program too;
- the failing step ends in an assertion that fails by itself: the model's
  result (a Python value), the size, a snapshot's flags, the identity of a
  state handed out (P6: the state it should or should not be is bound to a
  name where it was written or read), the error a live iteration should (or
  should not) have raised, the structural invariants (white-box). A step that
  raises or hangs is its own failure. The few checks no line states (a visit's
  entries, a bulk read) replay the program through the harness instead.

>>> from cowcheck.core.failures import Failure
>>> from cowcheck.core.program import Step
>>> steps = [Step("put", (1000, 0, [1])), Step("get", (1000, 0))]
>>> print("\\n".join(program_lines(steps, Failure("DIVERGENCE", "P1", "m", 1, [1], None))))
m.put(fresh(1000), 0, [1])
assert m.get(fresh(1000), 0) == [1]   # <-- fails here
"""

from __future__ import annotations

import json
import re

from cowcheck.model import ModelMap
from cowcheck.core.failures import CRASH, DIVERGENCE, INVARIANT, TIMEOUT, Failure
from cowcheck.core.keys import pinned
from cowcheck.core.program import Step, step_to_json
from cowcheck.core.states import entries
from cowcheck.map.ops import MAP_OPS, NEW_SNAPSHOT

__all__ = ["program_lines", "imports_for", "MARKER"]

MARKER = "   # <-- fails here"
_RETURNS = frozenset({"get", "get_mutate", "contains_key", "put_and_get_old", "remove_and_get_old", "read_snapshot",
                      "read_snapshot_transformed", "iterate", "keys", "size_of_namespace", "write_snapshot"})
_HOLDS = ("put", "put_and_get_old", "get", "get_mutate", "transform")  # steps after which the map holds a known object


class _Literal:
    """A key or namespace as written: ``fresh(v)`` for a fresh int or string, else ``repr(v)``."""

    __slots__ = ("text",)

    def __init__(self, value, held: bool) -> None:
        fresh = not held and not pinned(value) and type(value) in (int, str)
        self.text = f"fresh({value!r})" if fresh else repr(value)

    def __repr__(self) -> str:
        return self.text


def _written(step: Step, held: bool) -> Step:
    """The step with its keys and namespaces as written."""
    args = list(step.args)
    at = 0
    for domain in MAP_OPS[step.op].domains:
        if domain.kind in ("pair", "namespace"):
            for i in range(at, at + domain.arity):
                args[i] = _Literal(args[i], held)
        at += domain.arity
    return Step(step.op, tuple(args))


class _Model:
    """The program replayed on the model: per step the map's size before it, the model's result
    (a Python value), and which earlier step set the state the map should hold per slot."""

    def __init__(self, steps: list[Step], contract: str) -> None:
        from cowcheck.map.harness import Harness  # the harness needs this package first

        self.sizes: list[int] = []
        self.results: list = []
        self.holder: list[dict] = []
        harness = Harness(ModelMap(), white_box=False, contract=contract)
        holder: dict = {}
        for i, step in enumerate(steps):
            self.sizes.append(len(harness.model))
            self.holder.append(dict(holder))
            try:
                harness.apply(step)
            except Exception:
                self.results.append(None)
                break
            observed = harness.observed
            if observed is None and step.op == "write_snapshot":  # the model writes no bytes: what it holds
                observed = (entries(harness.snapshots[step.args[0]][1].iterate()),)
            self.results.append(observed[0] if observed is not None else None)
            if step.op in _HOLDS:
                holder[(step.args[0], step.args[1])] = i
            elif step.op in ("remove", "remove_and_get_old"):
                holder.pop((step.args[0], step.args[1]), None)


class _Writer:
    def __init__(self, steps: list[Step], failure: Failure, contract: str) -> None:
        self.steps, self.failure, self.contract = steps, failure, contract
        self.model = _Model(steps, contract)
        self.at = failure.step_index
        self.bound = self._p6_source()
        self.guard = failure.kind == INVARIANT and failure.code in ("I8", "I9")
        self.needs_program = False

    def lines(self) -> list[str]:
        out = ["guard = SnapshotGuard()  # what each snapshot reaches, to see it change (I8, I9)"] if self.guard else []
        held = False
        snapshots: list[int] = []
        for i, step in enumerate(self.steps[: self.at + 1]):
            held = held or step.op == "hold_keys"
            written = _written(step, held)
            lines = self._passing(i, written)
            if MAP_OPS[step.op].snapshot_role is NEW_SNAPSHOT:
                snapshots.append(step.args[0])
                if self.guard:
                    lines.append(f"guard.record(s{step.args[0]})")
            elif self.guard and step.op in ("release", "read_snapshot_transformed"):
                lines.append(f"guard.forget(s{step.args[0]}.version)")
            if i == self.at:
                lines = self._failing(written, lines, snapshots)
                asserts = [j for j, line in enumerate(lines) if line.startswith("assert ")]
                lines[asserts[-1] if asserts else -1] += MARKER
            out += lines
        if self.needs_program:
            program = json.dumps([step_to_json(s) for s in self.steps[: self.at + 1]])
            out = [f"PROGRAM = [MAP_OPS.parse(s) for s in json.loads({program!r})]"] + out
        return out

    # ------------------------------------------------------------ passing steps

    def _passing(self, i: int, step: Step) -> list[str]:
        op, a = step.op, step.args
        if op == "iterate_modify":
            position = min(self.steps[i].args[0], self.model.sizes[i])
            change = f"m.put({a[1]!r}, {a[2]!r}, [0])" if a[3] == "put" else f"m.remove({a[1]!r}, {a[2]!r})"
            return [f"it = iter(m); [next(it) for _ in range({position})]; {change}; raised = drain(it)"
                    f"  # live iteration across a change"]
        if self.bound is not None and self.bound[0] == i:
            name = self.bound[1]
            if op in ("put", "put_and_get_old"):
                call = f"m.{op}({a[0]!r}, {a[1]!r}, {name})"
                return [f"{name} = {a[2]!r}", call if op == "put" else self._isolated(call)]
            if op in ("get", "get_mutate"):
                lines = [f"{name} = m.get({a[0]!r}, {a[1]!r})"]
                if op == "get_mutate":
                    lines.append(f"{name} is not None and {name}.append({a[2]!r})  # mutate in place")
                return lines
            if op == "transform":
                return [f"kept = Kept(transform_append); m.transform({a[0]!r}, {a[1]!r}, {a[2]!r}, kept)",
                        f"{name} = kept.result  # the state the map holds now"]
        if op in ("put_and_get_old", "remove_and_get_old"):
            return [self._isolated(MAP_OPS.render(step))]
        return [MAP_OPS.render(step)]

    def _isolated(self, call: str) -> str:
        """Under the isolation contract the harness changes an old state it was handed in place."""
        if self.contract != "isolation":
            return call
        return f"old = {call}; old is not None and old.append(-1)  # the caller changes what it was handed"

    def _p6_source(self):
        """``(step index, name)`` of the step that set the state a failing P6 step is compared with."""
        failure, steps = self.failure, self.steps
        if (failure.kind, failure.code) != (DIVERGENCE, "P6") or self.at >= len(self.model.holder):
            return None
        step = steps[self.at]
        if step.op not in ("get", "get_mutate", "put_and_get_old", "remove_and_get_old", "transform"):
            return None
        source = self.model.holder[self.at].get((step.args[0], step.args[1]))
        return None if source is None else (source, f"state{source}")

    # ------------------------------------------------------------ the failing step

    def _failing(self, step: Step, lines: list[str], snapshots: list) -> list[str]:
        failure, op, a = self.failure, step.op, step.args
        kind, code = failure.kind, failure.code
        if op == "iterate_modify" and code == "P7" and kind in (CRASH, DIVERGENCE):
            structural = kind == DIVERGENCE
            want = "isinstance(raised, RuntimeError)" if structural else "not isinstance(raised, RuntimeError)"
            why = ("live iteration went on after a structural change" if structural
                   else "live iteration raised without a structural change")
            return lines + [f"assert {want}, {why!r}"]
        if kind == CRASH:
            return lines[:-1] + [lines[-1] + f"  # raises {failure.actual!r:.100}"]
        if kind == TIMEOUT:
            return lines[:-1] + [lines[-1] + "  # does not return"]
        if kind == INVARIANT:
            return self._invariant(step, lines, snapshots)
        if code == "P6" and self.bound is not None:
            return self._identity(step)
        if code == "P4":
            return lines + [f"assert {f'len(s{a[0]})' if op == 'snapshot' else 'len(m)'} == {failure.expected!r}"]
        if code == "P5":
            return lines + [f"assert s{a[0]}.version == {failure.expected!r}"]
        if code == "P3":
            return lines + [f"assert {'' if failure.expected == 'released=True' else 'not '}s{a[0]}.released"]
        if op == "rehash":
            return [f"for _ in range({a[2]!r}): assert m.contains_key({a[0]!r}, {a[1]!r}) == "
                    f"{self.model.results[self.at] if self.at < len(self.model.results) else failure.expected!r}"]
        if op == "transform" and code == "P1":
            old = failure.expected
            return [f"kept = Kept(transform_append); m.transform({a[0]!r}, {a[1]!r}, {a[2]!r}, kept)",
                    f"assert kept.called and kept.old == {old!r}, 'the transform function gets the old state'"]
        if op in _RETURNS and self.at < len(self.model.results):
            return list(MAP_OPS[op].regression(a, self.model.results[self.at]))
        return self._replayed(lines)

    def _identity(self, step: Step) -> list[str]:
        """P6: the state handed out must (or must not) be the one the map should hold."""
        copy = self.failure.expected == "fresh copy"
        relation, why = (("is not", "a live snapshot may share it: a fresh copy") if copy
                         else ("is", "no live snapshot is newer: the caller's own object"))
        op, a, name = step.op, step.args, self.bound[1]
        if op == "transform":
            return [f"kept = Kept(transform_append); m.transform({a[0]!r}, {a[1]!r}, {a[2]!r}, kept)",
                    f"assert kept.old {relation} {name}, {why!r}"]
        if op == "put_and_get_old":
            call = f"m.put_and_get_old({a[0]!r}, {a[1]!r}, {a[2]!r})"
        else:
            call = f"m.{'get' if op == 'get_mutate' else op}({a[0]!r}, {a[1]!r})"
        return [f"got = {call}", f"assert got {relation} {name}, {why!r}"]

    def _invariant(self, step: Step, lines: list[str], snapshots: list) -> list[str]:
        code = self.failure.code
        if code in ("I8", "I9"):
            return lines + ["assert guard.check() == []  # what a live snapshot reaches changed (I8, I9)"]
        if code in ("I0", "I4"):
            return self._replayed(lines)
        live = ", ".join(f"s{sid}" for sid in snapshots)
        versions = f"[s.version for s in ({live},) if not s.released]" if snapshots else "[]"
        return lines + [f"assert check_structure(m.introspect(), {versions}) == []  # the structure (I1-I7)"]

    def _replayed(self, lines: list[str]) -> list[str]:
        """A check no single line states: the harness over the program so far, as ``cowcheck replay`` runs it."""
        self.needs_program = True
        return lines + ["assert replay(PROGRAM, new_map, harness_class=Harness) is None  # the harness's own check"]


def program_lines(steps: list[Step], failure: Failure, contract: str = "flink") -> list[str]:
    """The steps as Python against a map ``m`` (built by ``new_map()``), the failing step
    (``failure.step_index``) ending in an assertion that fails, marked ``# <-- fails here``."""
    return _Writer(list(steps), failure, contract).lines()


_IMPORTS = (
    ("fresh", "cowcheck.core.keys"), ("nth_key", "cowcheck.core.keys"), ("Tuple2", "cowcheck.reference.keys"),
    ("TimeWindow", "cowcheck.reference.keys"), ("VOID_NAMESPACE", "cowcheck.reference.keys"),
    ("transform_append", "cowcheck.core.states"), ("entries", "cowcheck.core.states"),
    ("drain", "cowcheck.core.states"), ("Kept", "cowcheck.core.states"),
    ("MAP_OPS", "cowcheck.map.ops"), ("SNAPSHOT_TRANSFORMERS", "cowcheck.map.ops"),
    ("visit_and_prune_even", "cowcheck.map.ops"), ("written_entries", "cowcheck.map.ops"),
    ("check_structure", "cowcheck.reference.invariants"), ("SnapshotGuard", "cowcheck.reference.invariants"),
    ("replay", "cowcheck.core.shrink"), ("Harness", "cowcheck.map.harness"),
)


def imports_for(lines: list[str]) -> list[str]:
    """The import lines the program needs (``json`` and the names it uses)."""
    text = "\n".join(lines)
    out = ["import json"] if "json.loads" in text else []
    by_module: dict = {}
    for name, module in _IMPORTS:
        if re.search(rf"\b{name}\b", text):
            by_module.setdefault(module, []).append(name)
    return out + [f"from {module} import {', '.join(names)}" for module, names in by_module.items()]
