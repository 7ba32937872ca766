"""Apply checkpoint programs to a backend and the checkpoint model; check every property.

A program interleaves keyed operations on two list states (``a``: list<int>,
``b``: list<long>) with the life of checkpoints: start (synchronous part),
write one key group, complete, cancel, fail (an injected write error), and
restores of completed checkpoints (same range, smaller ranges, rescaled round
trips, and recovery that continues on the restored state). Checkpoints are
named by ``cid`` (the program's n-th checkpoint), steps are JSON-able data.
A step on a checkpoint that is not running (or not completed, for restores)
does nothing, so deleting steps while shrinking keeps programs meaningful;
a step naming a checkpoint no earlier step started, or a checkpoint id
started twice, makes a program ill-formed (:meth:`CheckpointHarness.valid_program`):
skipped while shrinking, bad input in a file.

Codes (``Failure.code``) beyond the map harness's P1 (reads), P4 (sizes),
P6 (identity: a state is a fresh copy iff a running checkpoint that has not
written its key group yet is newer than its last write; so P6 is also "copy-
on-write stops once released") and P7 (unexpected errors):

- C1 a completed checkpoint does not restore to the model's state at its
  synchronous point;
- C2 the same for a checkpoint whose write overlapped another checkpoint
  (concurrent checkpoints must be independent);
- C3 a map snapshot stays registered after its key group was written or its
  checkpoint ended (white-box), or a table snapshot is not released after
  the checkpoint ended, or the write progress is off;
- C4 rescaled restores do not partition the state exactly (each part holds
  exactly its key groups' entries; the parts' handles merged give it all back);
- C5 checkpoint files: a data file visible before its checkpoint completed,
  or a file left behind by a cancelled or failed one.

>>> from cowcheck.checkpoint.machine import small_backend
>>> h = CheckpointHarness(small_backend()())
>>> for step in [Step("kv_put", ("a", 1, 0, [1])), Step("checkpoint", (0, 0)),
...              Step("write_key_group", (0,)), Step("kv_get_mutate", ("a", 1, 0, 2)), Step("complete", (0,))]:
...     h.apply(step)
>>> sorted(h.coverage)
['cow-copy-under-checkpoint', 'spilled-to-file']
"""

from __future__ import annotations

import copy
import errno
import os
import tempfile
from typing import Any

from cowcheck.model.checkpoint_model import CheckpointModel
from cowcheck.checkpoint.ops import CHECKPOINT_OPS, KEYED
from cowcheck.core.failures import CRASH, DIVERGENCE, CheckFailure
from cowcheck.core.harness import HarnessBase
from cowcheck.core.program import Step
from cowcheck.core.states import entries, transform_append
from cowcheck.reference.checkpoint import CheckpointStreamFactory, PendingCheckpoint
from cowcheck.reference.hashing import key_group
from cowcheck.reference.serializers import IntSerializer, ListSerializer, LongSerializer
from cowcheck.reference.state_table import KeyGroupRange, key_group_range_for_operator

__all__ = [
    "CheckpointHarness",
    "key_pool",
    "CHECKPOINT_SCENARIOS",
    "REQUIRED_CHECKPOINT_SCENARIOS",
    "STATES",
    "InjectedWriteFailure",
    "FaultInjectingStreams",
    "render_checkpoint_step",
    "render_checkpoint_program",
]

# The states every program works on: name, namespace serializer, state serializer.
STATES = (
    ("a", IntSerializer(), ListSerializer(IntSerializer())),
    ("b", IntSerializer(), ListSerializer(LongSerializer())),
)

CHECKPOINT_SCENARIOS: dict[str, str] = {
    "write-while-mutated": "table snapshot written key group by key group while mutated",
    "restore-smaller-range": "restore into a smaller key-group range",
    "concurrent-checkpoints": "two checkpoints running at once",
    "cow-copy-under-checkpoint": "a read copied a state a running checkpoint still needs",
    "cow-stopped-after-write": "a read handed out the caller's own object: its key group was already written",
    "cancel-mid-write": "a checkpoint cancelled with some key groups written and some not",
    "fail-mid-write": "a write failure after some key groups were written",
    "spilled-to-file": "a checkpoint over its threshold written to a file",
    "kept-inline": "a checkpoint within its threshold kept inline",
    "merge-handles": "a restore merging several handles (scale in)",
    "recover-and-continue": "state restored from a checkpoint and changed further",
}
# The checkpoint scenarios docs/contract.md §13 requires every run to reach.
REQUIRED_CHECKPOINT_SCENARIOS = ("write-while-mutated", "restore-smaller-range")

_MISSING = object()


# ------------------------------------------------------------ fault injection


class InjectedWriteFailure(OSError):
    """The write error a ``fail`` step injects (ENOSPC)."""


class _FaultyStream:
    def __init__(self, inner, injector: "FaultInjectingStreams") -> None:
        self.inner = inner
        self.injector = injector

    def write(self, data: bytes) -> None:
        if self.injector.armed:
            self.injector.armed = False
            raise InjectedWriteFailure(errno.ENOSPC, "No space left on device (injected)")
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FaultInjectingStreams:
    """A stream factory whose stream fails its next write after ``arm()``."""

    def __init__(self, inner: CheckpointStreamFactory) -> None:
        self.inner = inner
        self.armed = False
        self.stream = None

    def create_stream(self, checkpoint_id: int):
        self.stream = _FaultyStream(self.inner.create_stream(checkpoint_id), self)
        return self.stream

    def arm(self) -> None:
        self.armed = True


# ------------------------------------------------------------ programs as data


def render_checkpoint_step(step: Step) -> str:
    return CHECKPOINT_OPS.render(step)


def render_checkpoint_program(steps: list[Step]) -> str:
    lines = ["backend = small_backend()()  # HeapKeyedStateBackend(KeyGroupRange(0, 7), 8, capacity=4)",
             "backend.register_state('a', IntSerializer(), ListSerializer(IntSerializer()))",
             "backend.register_state('b', IntSerializer(), ListSerializer(LongSerializer()))"]
    return "\n".join(lines + [render_checkpoint_step(s) for s in steps])


def _split(key_group_range: KeyGroupRange, parts: int) -> list[KeyGroupRange]:
    """``parts`` contiguous ranges covering ``key_group_range`` (Flink's operator split)."""
    n = len(key_group_range)
    parts = min(parts, n)
    start = key_group_range.start
    return [KeyGroupRange(start + r.start, start + r.end)
            for r in (key_group_range_for_operator(n, parts, i) for i in range(parts))]


# ------------------------------------------------------------ the harness


class CheckpointHarness(HarnessBase):
    """Drives one backend (a ``HeapKeyedStateBackend`` without states) against
    a fresh :class:`~cowcheck.model.checkpoint_model.CheckpointModel`.

    ``white_box``: also compare every map's registered snapshot versions with
    the model after every step (needs ``backend.state(name).maps``; None: if
    offered). Checkpoint files go to a private temporary directory.
    """

    operations = CHECKPOINT_OPS
    copy_reason = "a running checkpoint has not written its key group yet"
    own_reason = "no running checkpoint still needs this key group"

    def __init__(self, backend, *, white_box: bool | None = None) -> None:
        super().__init__()
        self.backend = backend
        for name, namespace_serializer, state_serializer in STATES:
            backend.register_state(name, namespace_serializer, state_serializer)
        self.max_parallelism = backend.max_parallelism
        self.key_group_range = backend.key_group_range
        self.model = CheckpointModel(self.key_group_of, list(self.key_group_range))
        if white_box is None:
            white_box = hasattr(backend.state(STATES[0][0]), "maps")
        self.white_box = white_box
        self._directory = tempfile.TemporaryDirectory(prefix="cowcheck-checkpoints-")
        self.directory = self._directory.name
        self.pending: dict = {}  # cid -> (PendingCheckpoint, FaultInjectingStreams)
        self.handles: dict = {}  # cid -> CheckpointHandle of a completed checkpoint
        self.overlapped: set = set()  # cids whose write overlapped another checkpoint
        self.mutations = 0
        self.mutations_at_start: dict = {}
        self.held: dict = {}  # (state, key, namespace) -> object the backend should hold

    def key_group_of(self, key) -> int:
        return key_group(key, self.max_parallelism)

    @classmethod
    def valid_program(cls, steps: list[Step]) -> bool:
        """Every checkpoint a step names was started by an earlier step, and no id is started twice."""
        started: set = set()
        for step in steps:
            if step.op in KEYED or step.op not in CHECKPOINT_OPS:
                continue
            cid = step.args[0]
            if step.op == "checkpoint":
                if cid in started:
                    return False
                started.add(cid)
            elif cid not in started:
                return False
        return True

    def close(self) -> None:
        """Cancel what still runs and delete the checkpoint directory."""
        for pending, _ in self.pending.values():
            pending.cancel()
        self._directory.cleanup()

    # ------------------------------------------------------------- helpers

    def _running(self, cid) -> bool:
        checkpoint = self.model.checkpoints.get(cid)
        return checkpoint is not None and checkpoint.status == "running" and cid in self.pending

    # ---------------------------------------------------------------- apply

    def _apply(self, step: Step) -> None:
        if step.op not in CHECKPOINT_OPS or len(step.args) != len(CHECKPOINT_OPS[step.op].args):
            self._fail(CRASH, "program", f"not a checkpoint step: {step!r}")
        getattr(self, "_op_" + step.op)(step, *step.args)
        self.check_after_step(step)

    def check_after_step(self, step: Step) -> None:
        for name, _, _ in STATES:
            want = sum(1 for (s, _, _) in self.model.data if s == name)
            got = self._call(step, len, self.backend.state(name))
            if got != want:
                self._fail(DIVERGENCE, "P4", f"after {render_checkpoint_step(step)}: state {name!r} has {got} "
                                             f"entries, model {want}", want, got)
        if self.white_box:
            self._check_registered_versions(step)
        self._check_files(step)

    def _check_registered_versions(self, step: Step) -> None:
        running = [self.model.checkpoints[c] for c in self.model.running()]
        for name, _, _ in STATES:
            for group, m in zip(self.key_group_range, self.backend.state(name).maps):
                want = {c.version for c in running if group in c.unwritten}
                if set(m.snapshot_versions) != want:
                    self._fail(DIVERGENCE, "C3", f"after {render_checkpoint_step(step)}: state {name!r}, key group "
                                                 f"{group}: snapshot versions {sorted(m.snapshot_versions)} "
                                                 f"registered, expected {sorted(want)}",
                               sorted(want), sorted(m.snapshot_versions))

    def _check_files(self, step: Step) -> None:
        finals = {os.path.basename(h.path) for h in self.handles.values() if h.path is not None}
        temps = set()
        for cid in self.model.running():
            stream = self.pending[cid][0].stream
            if stream is not None and getattr(stream, "temp_path", None):
                temps.add(os.path.basename(stream.temp_path))
        present = set(os.listdir(self.directory))
        if present != finals | temps:
            self._fail(DIVERGENCE, "C5", f"after {render_checkpoint_step(step)}: checkpoint directory holds "
                                         f"{sorted(present)}, expected completed files {sorted(finals)} and "
                                         f"in-progress temporary files {sorted(temps)}",
                       sorted(finals | temps), sorted(present))

    # ------------------------------------------------------------ keyed ops

    def _count_identity(self, state, key, namespace, copy_expected: bool) -> None:
        slot = self.model.data.get((state, key, namespace))
        if slot is None:
            return
        if copy_expected:
            self.coverage["cow-copy-under-checkpoint"] += 1
        elif any(self.model.checkpoints[c].version > slot[1] for c in self.model.running()):
            self.coverage["cow-stopped-after-write"] += 1

    def _op_kv_put(self, step, state, key, namespace, value):
        obj = list(value)
        self._call(step, self.backend.state(state).put, key, namespace, obj)
        self.model.put(state, key, namespace, copy.deepcopy(obj))
        self.held[(state, key, namespace)] = obj
        self.mutations += 1

    def _op_kv_get(self, step, state, key, namespace, mutate_with=_MISSING):
        copy_expected = self.model.copy_expected(state, key, namespace)
        self._count_identity(state, key, namespace, copy_expected)
        got = self._call(step, self.backend.state(state).get, key, namespace)
        want = self.model.get(state, key, namespace)
        if got != want:
            self._fail(DIVERGENCE, "P1", f"{render_checkpoint_step(step)}: model returned {want!r}, "
                                         f"backend returned {got!r}", want, got)
        self._expect_identity(step, (state, key, namespace), got, copy_expected)
        if got is not None:
            self.held[(state, key, namespace)] = got
            if mutate_with is not _MISSING:
                got.append(mutate_with)
                want.append(mutate_with)
                self.mutations += 1

    def _op_kv_get_mutate(self, step, state, key, namespace, value):
        self._op_kv_get(step, state, key, namespace, value)

    def _op_kv_remove(self, step, state, key, namespace):
        self._call(step, self.backend.state(state).remove, key, namespace)
        self.model.remove(state, key, namespace)
        self.held.pop((state, key, namespace), None)
        self.mutations += 1

    def _op_kv_transform(self, step, state, key, namespace, value):
        copy_expected = self.model.copy_expected(state, key, namespace)
        self._count_identity(state, key, namespace, copy_expected)
        seen = {}

        def fn(old, v):
            seen["old"], seen["old_content"] = old, copy.deepcopy(old)
            seen["new"] = transform_append(old, v)
            return seen["new"]

        self._call(step, self.backend.state(state).transform, key, namespace, value, fn)
        if "old" not in seen:
            self._fail(DIVERGENCE, "P1", f"{render_checkpoint_step(step)}: the transform function was never called")
        slot = self.model.data.get((state, key, namespace))
        want_old = copy.deepcopy(slot[0]) if slot else None
        if seen["old_content"] != want_old:
            self._fail(DIVERGENCE, "P1", f"{render_checkpoint_step(step)}: transform saw {seen['old_content']!r}, "
                                         f"model {want_old!r}", want_old, seen["old_content"])
        self._expect_identity(step, (state, key, namespace), seen["old"], copy_expected)
        self.model.transform(state, key, namespace, value, transform_append)
        self.held[(state, key, namespace)] = seen["new"]
        self.mutations += 1

    # ------------------------------------------------------------ checkpoints

    def _op_checkpoint(self, step, cid, threshold):
        if cid in self.model.checkpoints:
            self._fail(CRASH, "program", f"checkpoint id c{cid} used twice in one program")
        running = self.model.running()
        if running:
            self.coverage["concurrent-checkpoints"] += 1
            self.overlapped.update(running + [cid])
        streams = FaultInjectingStreams(CheckpointStreamFactory(self.directory, threshold))
        pending = self._call(step, self.backend.checkpoint, cid, streams)
        self.pending[cid] = (pending, streams)
        self.model.start(cid)
        self.mutations_at_start[cid] = self.mutations

    def _op_write_key_group(self, step, cid):
        if not self._running(cid):
            return
        pending = self.pending[cid][0]
        remaining = self._call(step, pending.advance)
        group = self.model.write_next(cid)
        if remaining != len(self.model.checkpoints[cid].unwritten):
            self._fail(DIVERGENCE, "C3", f"{render_checkpoint_step(step)}: {remaining} key groups left to write, "
                                         f"expected {len(self.model.checkpoints[cid].unwritten)}")
        if group is not None and self.mutations > self.mutations_at_start[cid]:
            self.coverage["write-while-mutated"] += 1

    def _end(self, step, cid, status: str) -> None:
        pending = self.pending[cid][0]
        self.model.end(cid, status)
        if pending.status != status:
            self._fail(DIVERGENCE, "C3", f"{render_checkpoint_step(step)}: checkpoint c{cid} is {pending.status}, "
                                         f"expected {status}", status, pending.status)
        unreleased = [name for name, s in pending.table_snapshots.items() if not s.released]
        if unreleased:
            self._fail(DIVERGENCE, "C3", f"{render_checkpoint_step(step)}: checkpoint c{cid} ended {status} but the "
                                         f"table snapshots of {unreleased} are not released (FLINK-13469)")

    def _op_complete(self, step, cid):
        if not self._running(cid):
            return
        handle = self._call(step, self.pending[cid][0].complete)
        self._end(step, cid, PendingCheckpoint.COMPLETED)
        self.handles[cid] = handle
        self.coverage["spilled-to-file" if handle.path is not None else "kept-inline"] += 1
        self._check_restore(step, cid, handle.key_group_range)

    def _op_cancel(self, step, cid):
        if not self._running(cid):
            return
        pending = self.pending[cid][0]
        if 0 < len(pending.written_key_groups) < len(self.key_group_range):
            self.coverage["cancel-mid-write"] += 1
        self._call(step, pending.cancel)
        self._end(step, cid, PendingCheckpoint.CANCELLED)

    def _op_fail(self, step, cid):
        if not self._running(cid):
            return
        pending, streams = self.pending[cid]
        if pending.written_key_groups:
            self.coverage["fail-mid-write"] += 1
        streams.arm()
        try:
            pending.complete()
        except InjectedWriteFailure:
            pass
        except Exception as exc:
            self._fail(CRASH, "P7", f"{render_checkpoint_step(step)}: raised {type(exc).__name__}: {exc} instead "
                                    f"of the injected write failure")
        else:
            self._fail(DIVERGENCE, "P7", f"{render_checkpoint_step(step)}: the injected write failure was swallowed")
        self._end(step, cid, PendingCheckpoint.FAILED)

    # ------------------------------------------------------------ restores

    def _restore(self, step, handles, key_group_range, what: str, code: str):
        try:
            return type(self.backend).restore(handles, key_group_range, capacity=self._capacity())
        except CheckFailure:
            raise
        except Exception as exc:
            self._fail(DIVERGENCE, code, f"{render_checkpoint_step(step)}: restoring {what} into {key_group_range} "
                                         f"raised {type(exc).__name__}: {exc}", "a restored backend", repr(exc))

    def _capacity(self) -> int:
        return getattr(self.backend, "capacity", 4)

    def _expect_restored(self, step, cid, restored, key_group_range, code: str, what: str) -> None:
        for name, _, _ in STATES:
            want = entries(self.model.frozen_entries(cid, name, key_group_range))
            got = entries(self._call(step, list, restored.state(name)))
            if want != got:
                missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
                self._fail(DIVERGENCE, code, f"{render_checkpoint_step(step)}: {what} into {key_group_range}, "
                                             f"state {name!r}: missing {missing[:3]}, unexpected {extra[:3]} "
                                             f"(state at the synchronous point of c{cid})", want, got)

    def _code(self, cid) -> str:
        return "C2" if cid in self.overlapped else "C1"

    def _check_restore(self, step, cid, key_group_range: KeyGroupRange) -> None:
        code = self._code(cid)
        restored = self._restore(step, [self.handles[cid]], key_group_range, f"checkpoint c{cid}", code)
        self._expect_restored(step, cid, restored, key_group_range, code, f"restore of c{cid}")

    def _op_restore(self, step, cid, start, end):
        if cid not in self.handles:
            return
        target = KeyGroupRange(start, end).intersection(self.handles[cid].key_group_range)
        if target.is_empty():
            return
        if len(target) < len(self.handles[cid].key_group_range):
            self.coverage["restore-smaller-range"] += 1
        self._check_restore(step, cid, target)

    def _op_rescale(self, step, cid, parts):
        if cid not in self.handles:
            return
        whole = self.handles[cid].key_group_range
        ranges = _split(whole, parts)
        part_handles = []
        for i, part in enumerate(ranges):
            restored = self._restore(step, [self.handles[cid]], part, f"c{cid}", "C4")
            self._expect_restored(step, cid, restored, part, "C4", f"scale-out part {i + 1}/{len(ranges)}")
            pending = self._call(step, restored.checkpoint, cid, CheckpointStreamFactory())
            part_handles.append(self._call(step, pending.complete))
        if len(ranges) > 1:
            self.coverage["restore-smaller-range"] += 1
            self.coverage["merge-handles"] += 1
        merged = self._restore(step, part_handles, whole, f"the {len(ranges)} part handles of c{cid}", "C4")
        self._expect_restored(step, cid, merged, whole, "C4", f"merge of {len(ranges)} rescaled parts")

    def _op_recover(self, step, cid):
        if cid not in self.handles:
            return
        for running in self.model.running():
            self._op_cancel(step, running)
        handle = self.handles[cid]
        code = self._code(cid)
        self.backend = self._restore(step, [handle], handle.key_group_range, f"checkpoint c{cid}", code)
        self.model.recover(cid)
        self.held = {}
        self.coverage["recover-and-continue"] += 1
        self._expect_restored(step, cid, self.backend, handle.key_group_range, code, "recovery")


def key_pool(backend, keys: int) -> list[int]:
    """The first ``keys`` ints whose key group the backend owns."""
    owned, max_parallelism = backend.key_group_range, backend.max_parallelism
    pool: list[int] = []
    for k in range(100_000):
        if key_group(k, max_parallelism) in owned:
            pool.append(k)
            if len(pool) == keys:
                break
    return pool
