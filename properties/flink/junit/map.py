"""The map machine's counterexamples as JUnit 5: Flink's own ``CopyOnWriteStateMap``.

The test lives in Flink's package ``org.apache.flink.runtime.state.heap`` (the
map's constructor is package-private, as for Flink's own
``CopyOnWriteStateMapTest``): a map of Flink's fixed capacity 128 with
``ListSerializer(IntSerializer)`` states, the program's keyed operations,
rehash reads, snapshots and live iteration. Keys and namespaces of the int, long
and string families (and ``VoidNamespace``) are written; tuple keys and window
namespaces, snapshot reads and the visitor are not yet. The failing checks: a
read against the model's value, and live iteration (P7: each entry once, or a
``ConcurrentModificationException`` exactly when a key was inserted or removed
before the iterator had returned every entry).
"""

from __future__ import annotations

import json

from cowcheck.core.keys import nth_key
from cowcheck.flink.junit.writer import JUnitUnsupported, Writer, java_string
from cowcheck.map.ops import MAP_OPS
from cowcheck.reference.keys import VoidNamespace

__all__ = ["MapWriter"]

FLINK_CAPACITY = 128
_NOT_YET = "snapshot reads are not written as JUnit yet"


def _java(value) -> str:
    """A key or namespace as a Java literal of the type Flink's state holds."""
    if isinstance(value, VoidNamespace):
        return "VoidNamespace.INSTANCE"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise JUnitUnsupported(f"a key or namespace of type {type(value).__name__} is not written as JUnit yet")
    if isinstance(value, str):
        return java_string(value)
    return f"{value}L" if not -(1 << 31) <= value < (1 << 31) else str(value)


def _plain(value) -> str:
    """A key as Java's ``String.valueOf`` prints it."""
    return "VoidNamespace" if isinstance(value, VoidNamespace) else str(value)


def _pair(key, namespace) -> str:
    return f"({_plain(key)}, {_plain(namespace)})"


def _state(state) -> str:
    return "null" if state is None else "new ArrayList<>(List.of(" + ", ".join(str(int(v)) for v in state) + "))"


class MapWriter(Writer):
    operations = MAP_OPS
    package = "org.apache.flink.runtime.state.heap"
    crash_code = "P7"
    imports = ("java.util.ArrayList", "java.util.ConcurrentModificationException", "java.util.HashMap",
               "java.util.HashSet", "java.util.Iterator", "java.util.List", "java.util.Map", "java.util.Set",
               "org.apache.flink.api.common.typeutils.base.IntSerializer",
               "org.apache.flink.api.common.typeutils.base.ListSerializer",
               "org.apache.flink.runtime.state.StateEntry",
               "org.apache.flink.runtime.state.VoidNamespace")
    cannot = {"read_snapshot": _NOT_YET, "read_snapshot_transformed": _NOT_YET, "write_snapshot": _NOT_YET,
              "transform": "transform functions are not written as JUnit yet",
              "visit": "the incremental visitor is not written as JUnit yet",
              "keys": "keys of a namespace are not written as JUnit yet"}

    def check_expressible(self) -> None:
        super().check_expressible()
        if self.cx.capacity not in (0, FLINK_CAPACITY):
            raise JUnitUnsupported(f"{self.file_name}: a map of capacity {self.cx.capacity}; Flink's maps have "
                                   f"{FLINK_CAPACITY}")
        for step in self.cx.steps[:self.failing + 1]:
            for value in step.args:
                if isinstance(value, VoidNamespace) or not isinstance(value, (int, str, list, type(None))):
                    _java(value)

    def setup(self) -> list[str]:
        return ["// Flink's CopyOnWriteStateMap (capacity 128), states List<Integer> copied by ListSerializer",
                "CopyOnWriteStateMap<Object, Object, List<Integer>> m =",
                "        new CopyOnWriteStateMap<>(new ListSerializer<>(IntSerializer.INSTANCE));",
                "Map<Integer, CopyOnWriteStateMapSnapshot<Object, Object, List<Integer>>> snapshots = new HashMap<>();",
                "List<Integer> v;"]

    # ------------------------------------------------------------ steps

    def step_put(self, key, namespace, state):
        return [f"m.put({_java(key)}, {_java(namespace)}, {_state(state)});"]

    def step_put_and_get_old(self, key, namespace, state):
        return [f"m.putAndGetOld({_java(key)}, {_java(namespace)}, {_state(state)});"]

    def step_get(self, key, namespace):
        return [f"m.get({_java(key)}, {_java(namespace)});"]

    def step_get_mutate(self, key, namespace, value):
        return [f"v = m.get({_java(key)}, {_java(namespace)});",
                f"if (v != null) v.add({int(value)});  // the caller mutates its state in place"]

    def step_contains_key(self, key, namespace):
        return [f"m.containsKey({_java(key)}, {_java(namespace)});"]

    def step_remove(self, key, namespace):
        return [f"m.remove({_java(key)}, {_java(namespace)});"]

    def step_remove_and_get_old(self, key, namespace):
        return [f"m.removeAndGetOld({_java(key)}, {_java(namespace)});"]

    def step_rehash(self, key, namespace, reads):
        return [f"for (int i = 0; i < {int(reads)}; i++) m.containsKey({_java(key)}, {_java(namespace)});  "
                f"// keyed reads drive the incremental rehash"]

    def step_snapshot(self, sid):
        return [f"snapshots.put({sid}, m.stateSnapshot());"]

    def step_release(self, sid):
        return [f"snapshots.remove({sid}).release();"]

    def step_iterate(self):
        return ["for (Iterator<StateEntry<Object, Object, List<Integer>>> it = m.iterator(); it.hasNext(); ) {",
                "    it.next();", "}"]

    def step_size_of_namespace(self, namespace):
        return [f"m.sizeOfNamespace({_java(namespace)});"]

    def step_hold_keys(self):
        return ["// the caller holds its key objects from here on (Java: the same boxed values)"]

    def _range(self, call: str, family, first, count, namespace, *rest) -> list[str]:
        keys = [nth_key(family, i) for i in range(first, first + count)]
        extra = "".join(", " + _state(r) for r in rest)
        return [f"for (Object k : new Object[] {{{', '.join(_java(k) for k in keys)}}}) "
                f"m.{call}(k, {_java(namespace)}{extra});"]

    def step_put_range(self, family, first, count, namespace, state):
        return self._range("put", family, first, count, namespace, state)

    def step_remove_range(self, family, first, count, namespace):
        return self._range("remove", family, first, count, namespace)

    def step_get_range(self, family, first, count, namespace):
        return self._range("get", family, first, count, namespace)

    def step_iterate_modify(self, position, key, namespace, change):
        return [*self._iterate_modify_head(position, key, namespace, change), "try {",
                "    while (it.hasNext()) it.next();", "} catch (ConcurrentModificationException e) {", "}"]

    def _iterate_modify_head(self, position, key, namespace, change) -> list[str]:
        modify = (f"m.put({_java(key)}, {_java(namespace)}, {_state([0])});" if change == "put"
                  else f"m.remove({_java(key)}, {_java(namespace)});")
        return ["Iterator<StateEntry<Object, Object, List<Integer>>> it = m.iterator();",
                "List<String> seen = new ArrayList<>();",
                f"for (int i = 0; i < {int(position)} && it.hasNext(); i++) seen.add(pair(it.next()));",
                modify]

    # ------------------------------------------------------------ failing checks

    def _model_value(self, key, namespace) -> str:
        state = self.model.model.get(key, namespace)
        return "null" if state is None else json.dumps(state)

    def expected(self) -> str:
        step = self.cx.steps[self.failing]
        if step.op in ("get", "get_mutate", "put_and_get_old", "remove_and_get_old"):
            return f"{step.op}({step.args[0]!r}, {step.args[1]!r}) answers {self._model_value(*step.args[:2])}"
        if step.op == "contains_key":
            return f"contains_key answers {str(self.model.model.contains_key(*step.args[:2])).lower()}"
        if step.op == "iterate_modify":
            return "each entry once, or a ConcurrentModificationException exactly when the change was structural"
        return ""

    def _read(self, call: str, key, namespace, want: str) -> list[str]:
        code = self.cx.failure.code
        return [f"assertEquals({java_string(want)}, String.valueOf(m.{call}), "
                f"{java_string(f'{code}: {self.operations.render(self.cx.steps[self.failing])}')});"]

    def fails_get(self, key, namespace):
        return self._read(f"get({_java(key)}, {_java(namespace)})", key, namespace, self._model_value(key, namespace))

    def fails_put_and_get_old(self, key, namespace, state):
        return self._read(f"putAndGetOld({_java(key)}, {_java(namespace)}, {_state(state)})", key, namespace,
                          self._model_value(key, namespace))

    def fails_remove_and_get_old(self, key, namespace):
        return self._read(f"removeAndGetOld({_java(key)}, {_java(namespace)})", key, namespace,
                          self._model_value(key, namespace))

    def fails_contains_key(self, key, namespace):
        return self._read(f"containsKey({_java(key)}, {_java(namespace)})", key, namespace,
                          str(self.model.model.contains_key(key, namespace)).lower())

    def fails_size_of_namespace(self, namespace):
        return [f"assertEquals({self.model.model.size_of_namespace(namespace)}, m.sizeOfNamespace({_java(namespace)}),"
                f" {java_string(self.cx.failure.code + ': size_of_namespace')});"]

    def fails_iterate_modify(self, position, key, namespace, change):
        before = {pair for pair in self.model.model.data}
        after = set(before) | {(key, namespace)} if change == "put" else set(before) - {(key, namespace)}
        total = len(before)
        structural = (change == "put") != ((key, namespace) in before)
        must = sorted(_pair(*p) for p in before & after)
        may = sorted(_pair(*p) for p in before | after)
        lines = [*self._iterate_modify_head(position, key, namespace, change),
                 "boolean raised = false;",
                 "try {",
                 "    while (it.hasNext()) seen.add(pair(it.next()));",
                 "} catch (ConcurrentModificationException e) {",
                 "    raised = true;",
                 "}"]
        render = self.operations.render(self.cx.steps[self.failing])
        if structural and min(position, total) < total:
            message = java_string(f"P7: {render}: iteration went on after a structural change")
            return lines + [f"assertTrue(raised, {message});"]
        lines += [f"assertFalse(raised, {java_string('P7: ' + render + ': raised without a structural change')});",
                  "Set<String> visited = new HashSet<>(seen);",
                  f"Set<String> may = Set.of({', '.join(java_string(p) for p in may)});",
                  f"assertTrue(may.containsAll(visited), "
                  f"{java_string('P1: ' + render + ': entries the map never held; it returned ')} + seen);"]
        if self.cx.strict_live_iteration:
            lines += [f"Set<String> must = Set.of({', '.join(java_string(p) for p in must)});",
                      f"assertEquals(visited.size(), seen.size(), "
                      f"{java_string('P7: ' + render + ': live iteration repeated entries; it returned ')} + seen);",
                      f"assertTrue(visited.containsAll(must), "
                      f"{java_string('P7: ' + render + ': live iteration skipped entries; it returned ')} + seen);"]
        return lines

    def nested(self) -> str:
        return ('/** An entry as "(key, namespace)". */\n'
                'static String pair(StateEntry<Object, Object, List<Integer>> e) {\n'
                '    return "(" + e.getKey() + ", " + e.getNamespace() + ")";\n'
                '}\n')
