"""The backend harness's steps on typed values and upgrades (a mixin of :class:`~cowcheck.backend.harness.BackendHarness`).

- ``pojo_mutate``: read a POJO value state, change the ``history`` array of
  the object handed out in place, write that object back (as user code does:
  copy-on-write must keep the change out of every snapshot taken before);
- ``upgrade``: a snapshot of this step (a checkpoint or a savepoint) restored
  into the job's new classes and descriptors — the POJO in another class
  version (values.py: fields added, removed, a field's type changed), the
  int states' time-to-live switched on or off — and the program goes on with
  the restored backend. A change Flink accepts must restore the model's
  state migrated (K8: added fields at their default, removed ones gone, values
  that gain TTL last accessed now, values that lose it kept); an
  incompatible one must be refused, by the restore or by the registration of
  the state (K9: ``StateMigrationException``, as Flink documents); the
  program then goes on with the backend it had. Before Flink 2.2 switching
  TTL is incompatible (the implementation's ``ttl_migration``);
- ``tail_checkpoint``: a backend of one key group holding one Kryo value
  whose last field is an empty array, snapshotted to memory streams and
  restored: the stream's last read is a zero-length read at its end (K10).

>>> from cowcheck.reference.keyed import HashMapStateBackend
>>> from cowcheck.backend.harness import BackendHarness
>>> from cowcheck.core.program import Step
>>> h = BackendHarness(HashMapStateBackend(capacity=4))
>>> for step in [Step("open", ("int", 8)), Step("update", ("value_pojo", 0, 0, 7)), Step("upgrade", ("canonical", 2, "flipped")),
...              Step("value", ("value_pojo", 0, 0)), Step("upgrade", ("checkpoint", 4, "same"))]:
...     h.apply(step)
>>> h.coverage["schema-field-added"], h.coverage["ttl-switched-on"], h.coverage["schema-incompatible-refused"], h.schema
(1, 1, 1, 2)
"""

from __future__ import annotations

import copy

import attrs

from cowcheck.backend.ops import NULLABLE_MAPS, TTL, descriptor_of
from cowcheck.backend.values import migrate_value, tail_blob, typed, upgrade_outcome
from cowcheck.core.failures import CRASH, DIVERGENCE, CheckFailure
from cowcheck.core.keys import fresh
from cowcheck.reference.hashing import key_group
from cowcheck.reference.pojo import AFTER_MIGRATION, AS_IS, INCOMPATIBLE
from cowcheck.reference.serializers import IntSerializer
from cowcheck.reference.state_table import KeyGroupRange

__all__ = ["UpgradeSteps", "UPGRADE_SCENARIOS", "flip_ttl"]

UPGRADE_SCENARIOS: dict[str, str] = {
    "pojo-state": "a step on a state of a POJO type (PojoSerializer)",
    "kryo-state": "a step on a state of a generic type serialized by Kryo",
    "kryo-empty-array": "a Kryo value written with an empty byte array",
    "pojo-changed-in-place": "a POJO handed out, changed in place and written back",
    "schema-compatible-as-is": "a restore into the same POJO class (another class loader): compatible as is",
    "schema-field-added": "a restore into the POJO class with a field added: migrated",
    "schema-field-removed": "a restore into the POJO class with a field removed: migrated",
    "schema-incompatible-refused": "a restore into the POJO class with a field's type changed: refused",
    "ttl-switched-on": "a restore with time-to-live switched on for states without it",
    "ttl-switched-off": "a restore with time-to-live switched off for states with it",
    "ttl-switch-refused": "a restore with time-to-live switched, refused (Flink before 2.2)",
    "tail-zero-length-read": "a snapshot whose stream ends with a Kryo value's empty array, restored",
}

UPGRADE_CHECKPOINT_ID = (1 << 40) + 1  # the snapshot an upgrade step takes (never one of the program's)
_ORDER = (AS_IS, AFTER_MIGRATION, INCOMPATIBLE)


def flip_ttl(spec):
    """``spec`` with time-to-live switched: on (updated on create and write) if it had none, off if it
    had; an int state only, and never a map that holds null values (a TTL value cannot hold null)."""
    if spec.value_type != "int" or spec.name in NULLABLE_MAPS:
        return spec
    return attrs.evolve(spec, ttl=TTL if spec.ttl is None else None, update_on_read=False)


class UpgradeSteps:
    """The steps of the module docstring (``self`` is a BackendHarness)."""

    def _op_pojo_mutate(self, step, name, key, namespace, index, value):
        state = self._at(step, name, key, namespace)
        got = self._call(step, state.value)
        self._observe(got)
        want = self.model.value(name, key, namespace)
        self._expect(step, "K1", want, got)
        history = None if got is None else got.fields.get("history")
        if not history:
            return
        history[index % len(history)] = value  # in place, in the object the backend handed out
        self._call(step, state.update, got)
        changed = copy.deepcopy(want)
        changed.fields["history"][index % len(history)] = value
        self.model.update(name, key, namespace, changed)
        self.coverage["pojo-changed-in-place"] += 1

    # ------------------------------------------------------------ upgrades

    def _op_upgrade(self, step, of, schema, ttl):
        form = None if of == "checkpoint" else of
        if form is not None:
            self._form(step, form)
        for running in list(self.futures):  # the job stops, as for recover: its snapshots complete first
            self._complete(step, running)
        flipped = ttl == "flipped"
        pojo = upgrade_outcome(self.schema, schema)
        switch = AS_IS if not flipped else AFTER_MIGRATION if self.ttl_migration else INCOMPATIBLE
        outcome = max(pojo, switch, key=_ORDER.index)
        handle = self._snapshot_now(step, UPGRADE_CHECKPOINT_ID, self._streams("memory"), form)
        frozen = self.model.freeze()
        before = self.specs, self.schema
        self.specs = {n: flip_ttl(s) for n, s in self.specs.items()} if flipped else dict(self.specs)
        self.schema = schema
        restored, states, error = self._restore_into_new_classes(step, handle)
        what = (f"the {of} of this step restored with Account class version {schema} (was {before[1]})"
                f"{' and time-to-live switched' if flipped else ''}")
        if outcome == INCOMPATIBLE:
            self.specs, self.schema = before
            if error is None:
                self._accepted_incompatible(step, restored, states, what, pojo, switch)
            self.coverage["schema-incompatible-refused" if pojo == INCOMPATIBLE else "ttl-switch-refused"] += 1
            return
        if error is not None:
            self.specs, self.schema = before
            self._fail(DIVERGENCE, "K8", f"{self._render(step)}: {what} ({outcome}) raised {error}",
                       "a restored backend", error)
        specs = self.specs
        model = frozen.upgraded(specs.values(), lambda name, v: migrate_value(specs[name].value_type, schema, v),
                                self.model.now)
        key = ("upgrade", len(self.steps))
        self.frozen[key] = model.freeze()
        try:
            self._expect_restored(step, key, restored, self._whole(), "K8", what)
        finally:
            del self.frozen[key]
        # The program goes on with a backend restored again: the check's reads renewed what states
        # with TTL on read and write hold, as recover does.
        self._dispose(step, restored)
        restored, states, error = self._restore_into_new_classes(step, handle)
        if error is not None:
            self._fail(DIVERGENCE, "K8", f"{self._render(step)}: {what}, restored a second time, raised {error}",
                       "a restored backend", error)
        self._dispose(step, self.kb)
        self.kb, self.states, self.model, self.current_key = restored, states, model, None
        self.generation += 1
        self._count_upgrade(before, flipped)

    def _restore_into_new_classes(self, step, handle):
        """(backend, states, None), or (None, None, the error) if the restore or a registration raised."""
        try:
            restored = self._call(step, self.impl.create_keyed_state_backend, self._key_serializer(),
                                  self.max_parallelism, self._whole(), [handle], **self._classes())
        except CheckFailure as exc:
            return None, None, self._refusal(exc)
        try:
            return restored, self._register(step, restored), None
        except CheckFailure as exc:
            error = self._refusal(exc)
        self._dispose(step, restored)
        return None, None, error

    def _refusal(self, exc: CheckFailure) -> str:
        """The implementation's exception, taken back from the failure it made (a refusal may be right)."""
        if exc.failure.kind != CRASH or exc.failure.code != self.crash_code:
            raise exc
        self.failure = None
        return str(exc.failure.actual)

    def _accepted_incompatible(self, step, restored, states, what, pojo, switch) -> None:
        """K9: the backend restored what Flink documents it refuses; what the POJO state reads then."""
        reads = []
        for key in self.pool[:2]:
            self._call(step, restored.set_current_key, fresh(key))
            state = states["value_pojo"]
            self._call(step, state.set_current_namespace, 0)
            reads.append(self._call(step, state.value))
        self._dispose(step, restored)
        why = "a field whose type changed" if pojo == INCOMPATIBLE else "time-to-live switched (before Flink 2.2)"
        self._fail(DIVERGENCE, "K9", f"{self._render(step)}: {what}: {why} is incompatible, which Flink refuses "
                                     f"(StateMigrationException); the backend restored it (the POJO state reads "
                                     f"{reads!r:.200})", "a refused restore", f"restored: {reads!r:.200}")

    def _count_upgrade(self, before, flipped: bool) -> None:
        old, new = before[1], self.schema
        if old == new:
            self.coverage["schema-compatible-as-is"] += 1
        else:
            fields_before, fields_after = set(typed("pojo", old, 0).fields), set(typed("pojo", new, 0).fields)
            if fields_after - fields_before:
                self.coverage["schema-field-added"] += 1
            if fields_before - fields_after:
                self.coverage["schema-field-removed"] += 1
        if flipped:
            switched = [(before[0][n].ttl is None) for n, s in self.specs.items() if s != before[0][n]]
            self.coverage["ttl-switched-on"] += any(switched)
            self.coverage["ttl-switched-off"] += not all(switched)

    # ------------------------------------------------------------ the stream's last read

    def _op_tail_checkpoint(self, step, key, value, of):
        form = None if of == "checkpoint" else of
        if form is not None:
            self._form(step, form)
        group = key_group(key, self.max_parallelism)
        part = KeyGroupRange(group, group)
        spec = self.specs["value_kryo"]
        side = self._call(step, self.impl.create_keyed_state_backend, self._key_serializer(), self.max_parallelism,
                          part, **self._classes())
        state = self._call(step, side.get_or_create_keyed_state, IntSerializer(), descriptor_of(spec, self.schema))
        self._call(step, side.set_current_key, fresh(key))
        self._call(step, state.set_current_namespace, 0)
        self._call(step, state.update, tail_blob(value))
        handle = self._snapshot_now(step, UPGRADE_CHECKPOINT_ID, self._streams("memory"), form, side)
        self._dispose(step, side)
        restored = self._restore(step, [handle], part, "K10", f"the {of} of a backend whose stream ends with an "
                                                              f"empty array")
        again = self._call(step, restored.get_or_create_keyed_state, IntSerializer(), descriptor_of(spec, self.schema))
        self._call(step, restored.set_current_key, fresh(key))
        self._call(step, again.set_current_namespace, 0)
        got = self._call(step, again.value)
        self._observe(got)
        self._dispose(step, restored)
        self._expect(step, "K10", tail_blob(value), got, f" (the {of} of one Kryo value restored)")
        self.coverage["tail-zero-length-read"] += 1
