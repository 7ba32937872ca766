"""The backend harness's savepoint, threshold and null-value steps (a mixin of :class:`~cowcheck.backend.harness.BackendHarness`).

- ``savepoint`` / ``savepoint_async``: a canonical savepoint (Flink's
  backend-independent format: ``kb.savepoint(id, streams, canonical=True)``)
  or a native one (``canonical=False``; Flink from 1.15), its asynchronous
  part on the task thread or racing it until ``join``; restored like a
  checkpoint (``restore``, ``rescale``, ``recover`` take its id), K7;
- ``forms``: a checkpoint, a canonical and a native savepoint taken of one
  state at one step, each restored and held to the same frozen copy of the
  model (K3 for the checkpoint, K7 for the savepoints);
- ``checkpoint_threshold``: a snapshot's size measured in memory streams,
  then the same snapshot to file streams whose inline threshold is one byte
  over it, exactly it, or one byte under it: the handle must hold the bytes
  inline (a byte-stream handle) at most at the threshold and in a file
  above it, with the same size (K10), and restore like any other;
- ``map_put_null``: a map state's user value set to null (the map without
  time-to-live: ops.NULLABLE_MAPS).

The implementation reports where a handle's bytes are (``handle.storage``:
``inline`` or ``file``) and how many there are (``handle.size``).

>>> from cowcheck.reference.keyed import HashMapStateBackend
>>> from cowcheck.backend.harness import BackendHarness
>>> from cowcheck.core.program import Step
>>> h = BackendHarness(HashMapStateBackend(capacity=4))
>>> for step in [Step("open", ("int", 8)), Step("map_put_null", ("map", 0, 0, 1)),
...              Step("savepoint", (0, "canonical", "memory")), Step("checkpoint_threshold", (1, "at", "canonical"))]:
...     h.apply(step)
>>> h.coverage["savepoint-canonical"], h.coverage["threshold-at"], h.coverage["restore-inline-handle"]
(2, 1, 2)
"""

from __future__ import annotations

from typing import Optional

from cowcheck.core.errors import UsageError
from cowcheck.core.failures import CRASH, DIVERGENCE
from cowcheck.reference.checkpoint import MAX_MEMORY_THRESHOLD

__all__ = ["SnapshotFormSteps", "SAVEPOINT_SCENARIOS", "FORMS_CHECKPOINT_ID"]

SAVEPOINT_SCENARIOS: dict[str, str] = {
    "savepoint-canonical": "a canonical savepoint (Flink's backend-independent format) taken",
    "savepoint-native": "a native savepoint (the backend's own format, Flink 1.15 on) taken",
    "savepoint-on-thread": "a savepoint whose asynchronous part ran on a thread of its own",
    "savepoint-restored": "a savepoint restored into a fresh backend (its range, a sub-range, split, recovered)",
    "forms-of-one-state": "a checkpoint and each savepoint of one state taken at one step, each restored",
    "map-null-value": "a map state's user value set to null",
    "threshold-below": "a file snapshot one byte under its streams' inline threshold (held inline)",
    "threshold-at": "a file snapshot exactly at its streams' inline threshold (held inline)",
    "threshold-above": "a file snapshot one byte over its streams' inline threshold (written to a file)",
    "restore-inline-handle": "a snapshot restored from its inline bytes (a byte-stream handle)",
    "restore-file-handle": "a snapshot restored from a file",
}

# The id the snapshots of a ``forms`` step are taken with (never one of the program's).
FORMS_CHECKPOINT_ID = 1 << 40
_THRESHOLD = {"below": 1, "at": 0, "above": -1}  # threshold = size + this


class SnapshotFormSteps:
    """The steps of the module docstring; the harness provides ``_take``, ``_check_restore`` and
    the rest (``self`` is a BackendHarness)."""

    def _op_map_put_null(self, step, name, key, namespace, user_key):
        self._call(step, self._at(step, name, key, namespace).put, user_key, None)
        self.model.map_put(name, key, namespace, user_key, None)
        self.coverage["map-null-value"] += 1

    def _form(self, step, form: str) -> None:
        """Count a savepoint of ``form``; one the implementation cannot take is a malformed program."""
        if form == "native" and not self.native_savepoints:  # (a stored program replayed on an older release)
            raise UsageError(f"{self._render(step)}: a native savepoint, which this implementation does not take "
                             f"(Flink has them from 1.15.0): the program cannot run on it")
        self.coverage[f"savepoint-{form}"] += 1

    def _op_savepoint(self, step, cid, form, target):
        self._form(step, form)
        self._op_checkpoint(step, cid, target, form)

    def _op_savepoint_async(self, step, cid, form, target, seed):
        self._form(step, form)
        self._op_checkpoint_async(step, cid, target, seed, form)
        if cid in self.futures:
            self.coverage["savepoint-on-thread"] += 1

    def _what(self, cid) -> str:
        return f"{'savepoint' if cid in self.savepoint_ids else 'checkpoint'} c{cid}"

    def _count_handles(self, step, cid, handles: list) -> None:
        if cid in self.savepoint_ids:
            self.coverage["savepoint-restored"] += 1
        for handle in handles:
            storage = self._call(step, lambda handle=handle: handle.storage)
            self.coverage[f"restore-{storage}-handle"] += 1

    def _snapshot_now(self, step, cid, streams, form: Optional[str], kb=None):
        """Both parts of a snapshot of ``kb`` (default: the program's backend; a savepoint of ``form``
        if given) on the task thread, compressed as the program's snapshots are (snapshot compression
        is the job's setting); its handle."""
        kb = self.kb if kb is None else kb
        if form is None:
            future = self._snapshot(step, kb, cid, streams)
        else:
            future = self._savepoint(step, cid, streams, form, kb)
        return self._call(step, future.run)

    def _op_forms(self, step, target):
        frozen = ("forms", len(self.steps))  # the model's copy for this step's snapshots
        self.frozen[frozen] = self.model.freeze()
        try:
            for form in (None, "canonical", "native"):
                if form == "native" and not self.native_savepoints:
                    continue
                handle = self._snapshot_now(step, FORMS_CHECKPOINT_ID, self._streams(target), form)
                what = f"the {form or 'checkpoint'}{' savepoint' if form else ''} of this step"
                self._check_restore(step, frozen, [handle], self._whole(), what, code="K7" if form else "K3")
        finally:
            del self.frozen[frozen]
        self.coverage["forms-of-one-state"] += 1

    def _op_checkpoint_threshold(self, step, cid, relation, of):
        form = None if of == "checkpoint" else of
        if form is not None:
            self._form(step, form)
        measured = self._snapshot_now(step, cid, self._streams("memory"), form)
        size = self._call(step, lambda: measured.size)
        threshold = size + _THRESHOLD[relation]
        if not 0 <= threshold <= MAX_MEMORY_THRESHOLD:  # Flink's FsCheckpointStreamFactory takes at most 1 MiB
            threshold = min(max(threshold, 0), MAX_MEMORY_THRESHOLD)
        future = self._take(step, cid, self._streams("file", threshold), form)
        handle = self.handles[cid] = self._call(step, future.run)
        storage, written = self._call(step, lambda: (handle.storage, handle.size))
        want = "inline" if size <= threshold else "file"
        if (storage, written) != (want, size):
            self._fail(DIVERGENCE, "K10", f"{self._render(step)}: a {of} of {size} bytes (in memory streams) to file "
                                          f"streams with an inline threshold of {threshold} bytes: expected "
                                          f"{want} and {size} bytes, got {storage} and {written} bytes",
                       (want, size), (storage, written))
        if threshold - size == _THRESHOLD[relation]:
            self.coverage[f"threshold-{relation}"] += 1
        self._check_restore(step, cid, [handle], self._whole(), self._what(cid))
