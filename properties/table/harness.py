"""The table harness: a state table against the model, through re-registration of its serializer.

The model is a dict of (key, namespace) -> state and, per snapshot, a frozen
copy taken when the snapshot was made. Checked: every read equals the model
(T1); every snapshot read, and every key group a checkpoint writes from it
(``write_snapshot``: Flink's ``writeStateInKeyGroup``, decoded), equals its
frozen copy (T2); the table raises nowhere the model does not (T3). With
values declared immutable nothing is copied; once ``set_meta_info`` has
registered a copying serializer, a state the caller mutates in place must
never reach a snapshot taken before — which is what FLINK-26853 broke
(the maps kept copying with the old serializer).
"""

from __future__ import annotations

import copy
import io
import json

from cowcheck.core.failures import CRASH, DIVERGENCE
from cowcheck.core.harness import HarnessBase
from cowcheck.core.program import Step
from cowcheck.core.states import decode_written, entries, write_serializers
from cowcheck.table.ops import TABLE_OPS
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import SerializationError

MAX_PARALLELISM = 128  # the tables of this machine own key groups 0..127 of 128

__all__ = ["TableHarness", "TableMachineConfig"]

import attrs


@attrs.frozen
class TableMachineConfig:
    """What the machine generates: how many keys and namespaces."""

    keys: int = 6
    namespaces: int = 2
    white_box: bool | None = None


class TableHarness(HarnessBase):
    operations = TABLE_OPS
    crash_code = "T3"

    def __init__(self, impl, white_box: bool | None = None) -> None:
        super().__init__()
        self.impl = impl
        self.white_box = False
        self.model: dict = {}
        self.frozen: dict = {}  # sid -> the model's entries when the snapshot was taken
        self.snapshots: dict = {}  # sid -> the implementation's snapshot
        self.released: set = set()
        self.copying = False  # set_meta_info has registered the copying serializer

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        copying, taken, released = False, set(), set()
        for step in steps:
            if step.op == "set_meta_info":
                copying = True
            elif step.op == "get_mutate" and not copying:
                return False  # values are declared immutable until then
            elif step.op == "snapshot":
                if step.args[0] in taken:
                    return False
                taken.add(step.args[0])
            elif step.op in ("read_snapshot", "release", "write_snapshot"):
                if step.args[0] not in taken or step.args[0] in released:
                    return False
                if step.op != "read_snapshot":
                    released.add(step.args[0])
        return True

    @classmethod
    def normalise(cls, steps: list[Step]) -> list[Step]:
        """Snapshot ids renumbered 0, 1, 2… in order of appearance."""
        ids: dict = {}
        out = []
        for step in steps:
            if step.op in ("snapshot", "read_snapshot", "release", "write_snapshot"):
                sid = ids.setdefault(step.args[0], len(ids))
                step = Step(step.op, (sid,))
            out.append(step)
        return out

    def _expect(self, step, want, got, code="T1"):
        if want != got:
            self._fail(DIVERGENCE, code, f"{self._render(step)}: model {want!r}, table {got!r}", want, got)

    def _op_put(self, step, key, namespace, state):
        self._call(step, self.impl.put, key, namespace, list(state))
        self.model[(key, namespace)] = list(state)

    def _op_get(self, step, key, namespace):
        got = self._call(step, self.impl.get, key, namespace)
        self._expect(step, self.model.get((key, namespace)), None if got is None else list(got))

    def _op_get_mutate(self, step, key, namespace, value):
        if not self.copying:
            self._fail(CRASH, "program", f"{self._render(step)}: in-place mutation before set_meta_info "
                                         f"(values are declared immutable then)")
        got = self._call(step, self.impl.get, key, namespace)
        want = self.model.get((key, namespace))
        self._expect(step, want, None if got is None else list(got))
        if got is not None:
            if any(sid not in self.released for sid in self.snapshots):
                self.coverage["mutate-after-reregistration-under-snapshot"] += 1
            self._call(step, got.append, value)
            want.append(value)

    def _op_set_meta_info(self, step):
        self._call(step, self.impl.set_meta_info)
        self.copying = True

    def _op_snapshot(self, step, sid):
        self.snapshots[sid] = self._call(step, self.impl.snapshot)
        self.frozen[sid] = entries((k, n, copy.deepcopy(s)) for (k, n), s in self.model.items())

    def _op_read_snapshot(self, step, sid):
        if sid in self.released or sid not in self.snapshots:
            return
        got = entries(self._call(step, lambda: [tuple(e) for e in self.snapshots[sid]]))
        if got != self.frozen[sid]:
            missing = sorted(set(self.frozen[sid]) - set(got))
            extra = sorted(set(got) - set(self.frozen[sid]))
            self._fail(DIVERGENCE, "T2", f"{self._render(step)}: snapshot s{sid} differs from its frozen copy: "
                                         f"missing {missing[:3]}, unexpected {extra[:3]}", self.frozen[sid], got)

    def _op_write_snapshot(self, step, sid):
        """Flink's checkpoint write: ``writeStateInKeyGroup`` for every key group (each
        releases its map's snapshot), the bytes decoded with Flink's serializers and
        compared, key group by key group, with the model's frozen copy (T2)."""
        if sid in self.released or sid not in self.snapshots:
            return
        snap = self.snapshots[sid]
        frozen: dict = {}
        for entry in self.frozen[sid]:
            key = json.loads(entry)[0]
            frozen.setdefault(key_group(key, MAX_PARALLELISM), []).append(entry)
        for group in range(MAX_PARALLELISM):
            out = io.BytesIO()
            self._call(step, snap.write_key_group, out, group, *write_serializers())
            data = out.getvalue()
            try:
                count, got = decode_written(data)
            except SerializationError as exc:
                self._fail(DIVERGENCE, "T2", f"{self._render(step)}: key group {group}: {len(data)} bytes that do "
                                             f"not decode: {exc}", frozen.get(group, []), data[:64].hex())
            got = entries(got)
            if got != sorted(frozen.get(group, [])) or count != len(got):
                self._fail(DIVERGENCE, "T2", f"{self._render(step)}: key group {group} of snapshot s{sid} was "
                                             f"written as {got[:3]}, the model froze {sorted(frozen.get(group, []))[:3]}",
                           sorted(frozen.get(group, [])), got)
        self.released.add(sid)

    def _op_release(self, step, sid):
        if sid in self.snapshots and sid not in self.released:
            self._call(step, self.snapshots[sid].release)
            self.released.add(sid)
