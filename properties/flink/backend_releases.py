"""Checkpoints across releases: written by one Flink release's keyed backend, restored by another's.

``python -m cowcheck.flink.backend_releases [--versions A,B,...] [--programs N] [--steps S]
[--pairs X:Y,...]`` runs, per writer release X (one process each: one JVM, one release), ``N``
seeded walks of the backend machine on Flink X, every checkpoint's asynchronous part on the task
thread, each step checked against the model as always. After every completed checkpoint it
records the handle (described as text: key-group range, offsets, and the bytes or the file, which
stays on disk), the clock's time, and what a restore must show then according to the model's copy
frozen at that checkpoint: for every state and namespace the keys its key iteration must and may
list, and what each key shows. Per reader release Y (one process each) every recorded handle is
rebuilt, restored into a fresh backend of release Y at that time (its own key-group range), the
states registered again, and every key and value compared.

``reference`` stands for the reference's keyed backend writing and reading Flink's checkpoint
format (:mod:`cowcheck.reference.checkpoint.flink_format`, issue 28 point 3): the pairs
``reference:2.3.0,2.3.0:reference`` check that real Flink restores what the reference wrote and the
reference restores what Flink wrote, both to the model's state. The reference's walks also restore
every checkpoint (and rescale) in the reference itself, checked by the harness as always.

By default the pairs are every release given against 2.3.0 both ways, each release against the
next one (both ways) and each against itself. The printed matrix says, per pair, how many
checkpoints restored to the model's state, how many differ, how many a release could not restore
(the exception's first line), and how many programs the writer could not finish (a failure of
its own, e.g. FLINK-20772 before 1.19.0: its earlier checkpoints still count). Exit 0 if every
pair restores every checkpoint, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from cowcheck.core.processes import module_command

__all__ = ["write", "read", "pairs_of", "main", "REFERENCE", "describe_handle", "rebuild_handle"]

# The pseudo-release: the reference's keyed backend in Flink's checkpoint format.
REFERENCE = "reference"


def _order(version: str) -> tuple:
    from cowcheck.flink.releases import parse_version

    return (0,) if version == REFERENCE else (1, *parse_version(version))


def describe_handle(handle) -> str:
    """A reference ``KeyGroupsStateHandle`` as ``BackendHandle.describe`` writes Flink's (the
    key-group range, each group's offset, then ``bytes BASE64`` or ``file SIZE PATH``)."""
    import base64

    from cowcheck.reference.checkpoint.flink_format.savepoint import KeyGroupsSavepointStateHandle

    r = handle.key_group_range
    lines = [f"range {r.start} {r.end}", "offsets " + " ".join(str(o) for _, o in handle.offsets)]
    lines.append(f"bytes {base64.b64encode(handle.inline).decode('ascii')}" if handle.path is None
                 else f"file {handle.size} {handle.path}")
    if isinstance(handle, KeyGroupsSavepointStateHandle):
        lines.append("savepoint")
    return "\n".join(lines)


def rebuild_handle(text: str, max_parallelism: int):
    """The reference ``KeyGroupsStateHandle`` a ``describe`` text stands for (a file is read where
    it lies: Flink writes its path as a ``file:`` URI or a plain path)."""
    import base64

    from cowcheck.reference.checkpoint.flink_format import KeyGroupsStateHandle
    from cowcheck.reference.state_table import KeyGroupRange

    from cowcheck.reference.checkpoint.flink_format.savepoint import KeyGroupsSavepointStateHandle

    range_line, offsets_line, data_line, *kind_line = text.split("\n")
    handle_class = KeyGroupsSavepointStateHandle if kind_line == ["savepoint"] else KeyGroupsStateHandle
    start, end = (int(x) for x in range_line.split()[1:])
    offsets = [int(x) for x in offsets_line.split()[1:]]
    pairs = list(zip(range(start, end + 1), offsets))
    kind, rest = data_line.split(" ", 1)
    if kind == "bytes":
        data = base64.b64decode(rest)
        return handle_class(KeyGroupRange(start, end), pairs, len(data), inline=data, max_parallelism=max_parallelism)
    size, path = rest.split(" ", 1)
    if path.startswith("file:"):
        path = "/" + path[len("file:"):].lstrip("/")
    return handle_class(KeyGroupRange(start, end), pairs, int(size), path=path, max_parallelism=max_parallelism)


def _reads(kind: str):
    return {"value": ("value", None), "reducing": ("get", None), "list": ("get", "list"),
            "map": ("entries", "map")}[kind]


def json_value(value):
    """A state's value as JSON: an int or a string as it is, a Record as its class and fields, bytes
    as hex, lists element by element (records.json holds what a restore must show)."""
    from cowcheck.reference.pojo import Record

    if isinstance(value, Record):
        return {"record": value.class_name, "fields": {k: json_value(v) for k, v in value.fields.items()}}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def _answer(got, shape):
    if shape == "list":
        return json_value(list(got)) if got else None
    if shape == "map":
        return sorted(json_value([[k, v] for k, v in got]), key=repr) if got else None
    return json_value(got)


def write(version: str, programs: int, steps: int, out: Path) -> dict:
    """In this process: the walks on ``flink@version``, their checkpoints recorded under ``out``."""
    import cowcheck.flink  # noqa: F401
    import cowcheck.registry  # noqa: F401
    from cowcheck.backend.harness import BackendHarness
    from cowcheck.backend.ops import NAMESPACES, STATES
    from cowcheck.backend.walks import walk_program
    from cowcheck.core.failures import CheckFailure
    from cowcheck.core.impls import resolve
    from cowcheck.core.limits import limited
    from cowcheck.flink.backend import LEFT_OUT_OF_COMPARISONS
    from cowcheck.flink.jvm import Java
    from cowcheck.reference.checkpoint import CheckpointStreamFactory

    class Writer(BackendHarness):
        """The backend harness, with file snapshots kept in ``out``; it leaves the restores of what
        it writes to the readers (the writer's own release among them), so that a snapshot its own
        release cannot restore (a finding of the backend machine) is still handed to the others."""

        def _check_restore(self, step, cid, handles, key_group_range, what, code=None):
            return None

        def _streams(self, target: str, threshold: int = 0):
            if target == "memory":
                return super()._streams(target)
            self.coverage["checkpoint-file"] += 1
            return CheckpointStreamFactory(str(out / "files"), threshold=threshold)

    (out / "files").mkdir(parents=True, exist_ok=True)
    if version == REFERENCE:
        implementation = resolve("reference-flink-format", "backend")
        describe = describe_handle
    else:
        implementation = resolve(f"flink@{version}", "backend")
        # Looked up when called: the JVM starts with the first backend.
        describe = lambda handle: str(Java.jpype.JClass("cowcheck.bridge.BackendHandle").describe(handle.java))  # noqa: E731
    factory, settings = implementation.factory, dict(implementation.config_defaults)
    records, failed = [], []
    with limited(60.0):
        for seed in range(programs):
            harness = Writer(factory(), async_part="inline", **settings)
            seen: set = set()
            try:
                for step in walk_program(seed, steps, native_savepoints=settings.get("native_savepoints", True)):
                    if step.op in LEFT_OUT_OF_COMPARISONS:
                        continue
                    harness.apply(step)
                    for cid in sorted(set(harness.handles) - seen):
                        seen.add(cid)
                        records.append(_record(harness, cid, seed, NAMESPACES, describe))
            except CheckFailure as exc:
                failed.append({"seed": seed, "failure": f"{exc.failure.kind} {exc.failure.code}: "
                                                       f"{exc.failure.message[:200]}"})
            finally:
                harness.close()
    (out / "records.json").write_text(json.dumps({"version": version, "records": records, "failed": failed}))
    forms: dict = {}
    for record in records:
        forms[record["form"]] = forms.get(record["form"], 0) + 1
    return {"version": version, "checkpoints": len(records), "programs": programs, "failed": len(failed),
            "forms": forms}


def _record(harness, cid, seed, namespaces, describe) -> dict:
    """What a restore of ``cid`` must show, with what it needs: the job's class version and states
    (their time-to-live, as upgrades left them) when it was taken, and its form."""
    frozen, time = harness.frozen[cid], harness.frozen[cid].time
    states = list(frozen.specs.values())
    expected = {}
    for spec in states:
        for namespace in range(namespaces):
            shows = frozen.entries(spec.name, namespace, time, lambda key: True)
            may = frozen.may_keys(spec.name, namespace, lambda key: True)
            shape = _reads(spec.kind)[1]
            expected[f"{spec.name}/{namespace}"] = {
                "must": sorted(map(repr, shows)), "may": sorted(map(repr, may)),
                "shows": [[key, _answer(value if shape != "map" else list(value.items()), shape)]
                          for key, value in sorted(shows.items(), key=lambda kv: repr(kv[0]))]}
    return {"seed": seed, "cid": cid, "key_type": harness.key_type, "max_parallelism": harness.max_parallelism,
            "time": time, "pool": harness.pool, "handle": describe(harness.handles[cid]), "expected": expected,
            "form": harness.forms.get(cid, "checkpoint"), "class_version": harness.schema,
            "ttl": {spec.name: [spec.ttl, spec.update_on_read] for spec in states}}


def read(version: str, written: Path) -> dict:
    """In this process: every checkpoint recorded in ``written`` restored by ``flink@version``."""
    import cowcheck.flink  # noqa: F401
    from cowcheck.backend import reference_flink_format_backend
    from cowcheck.backend.ops import NAMESPACES, STATES, descriptor_of
    from cowcheck.core.keys import FAMILIES, fresh
    from cowcheck.flink.backend import FlinkCheckpointHandle, FlinkStateBackend
    from cowcheck.flink.jvm import Java, jvm
    from cowcheck.flink.releases import select_release
    from cowcheck.reference.serializers import IntSerializer
    from cowcheck.reference.state_table import KeyGroupRange

    if version == REFERENCE:
        new_backend, rebuild = reference_flink_format_backend, rebuild_handle
    else:
        select_release(version)
        jvm()
        new_backend = FlinkStateBackend
        java_rebuild = Java.jpype.JClass("cowcheck.bridge.BackendHandle").rebuild
        rebuild = lambda text, mp: FlinkCheckpointHandle(java_rebuild(text))  # noqa: E731
    data = json.loads((written / "records.json").read_text())
    out = {"writer": data["version"], "reader": version, "writer_failed": len(data["failed"]), "forms": {}}
    for record in data["records"]:
        form = record.get("form", "checkpoint")
        counts = out["forms"].setdefault(form, {"checkpoints": 0, "same": 0, "different": [], "unrestorable": []})
        counts["checkpoints"] += 1
        where = f"seed {record['seed']} c{record['cid']} ({form})"
        specs = _specs(record, STATES)
        version_of_classes = record.get("class_version", 1)
        try:
            backend = new_backend()
            backend.clock.advance(record["time"])
            mp = record["max_parallelism"]
            classes = {"class_version": version_of_classes} if version_of_classes != 1 else {}
            kb = backend.create_keyed_state_backend(FAMILIES[record["key_type"]].serializer(), mp,
                                                    KeyGroupRange(0, mp - 1), [rebuild(record["handle"], mp)],
                                                    **classes)
            states = {spec.name: kb.get_or_create_keyed_state(IntSerializer(), descriptor_of(spec, version_of_classes))
                      for spec in specs}
            difference = _compare(kb, states, record, specs, NAMESPACES, fresh)
            if hasattr(kb, "dispose"):  # Flink's backends hold native resources; the reference's do not
                kb.dispose()
        except Exception as exc:  # the release could not restore it: reported, with the first line
            text = str(exc).splitlines()[0][:300] if str(exc) else ""
            counts["unrestorable"].append(f"{where}: {type(exc).__name__}: {text}"
                                          if len(counts["unrestorable"]) < 5 else where)
            continue
        if difference is None:
            counts["same"] += 1
        else:
            counts["different"].append(f"{where}: {difference}")
    return out


def _specs(record: dict, states) -> list:
    """The states a record's job had registered: their time-to-live as it recorded them (a record
    written before the records said: the states its expectations name)."""
    import attrs

    if "ttl" not in record:
        return [spec for spec in states if f"{spec.name}/0" in record["expected"]]
    by_name = {spec.name: spec for spec in states}
    return [attrs.evolve(by_name[name], ttl=ttl, update_on_read=on_read) for name, (ttl, on_read) in record["ttl"].items()]


def _compare(kb, states, record, specs, namespaces, fresh) -> str | None:
    """The first difference between the restored backend and the record's expectations, or None."""
    expected = record["expected"]
    for spec in specs:
        for namespace in range(namespaces):
            want = expected[f"{spec.name}/{namespace}"]
            got = set(map(repr, kb.get_keys(spec.name, namespace)))
            if not set(want["must"]) <= got <= set(want["may"]):
                return (f"state {spec.name!r}, namespace {namespace}: keys {sorted(got)}, expected between "
                        f"{want['must']} and {want['may']}")
    shows = {(name_ns, repr(key)): value for name_ns, w in expected.items() for key, value in w["shows"]}
    for key in record["pool"]:
        kb.set_current_key(fresh(key))
        for spec in specs:
            method, shape = _reads(spec.kind)
            state = states[spec.name]
            for namespace in range(namespaces):
                state.set_current_namespace(namespace)
                got = _answer(getattr(state, method)(), shape)
                want = shows.get((f"{spec.name}/{namespace}", repr(key)))
                if got != want:
                    return f"state {spec.name!r}, key {key!r}, namespace {namespace}: {got!r}, expected {want!r}"
    return None


def pairs_of(versions: list[str], newest: str = "2.3.0") -> list[tuple[str, str]]:
    """Each release against ``newest`` both ways, against the next both ways, and against itself."""
    ordered = sorted(set(versions) | {newest}, key=_order)
    pairs = {(v, v) for v in ordered}
    pairs |= {(v, newest) for v in ordered} | {(newest, v) for v in ordered}
    pairs |= {(a, b) for a, b in zip(ordered, ordered[1:])} | {(b, a) for a, b in zip(ordered, ordered[1:])}
    return sorted(pairs, key=lambda p: (_order(p[0]), _order(p[1])))


def _one(*args: str) -> dict:
    run = subprocess.run(module_command("cowcheck.flink.backend_releases", *args), capture_output=True,
                         text=True)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        tail = [line for line in run.stderr.splitlines() if line.strip()]
        raise RuntimeError(tail[-1] if tail else f"exit {run.returncode}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.backend_releases",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default="1.13.6,2.3.0", help="releases, comma-separated (default 1.13.6,2.3.0)")
    p.add_argument("--pairs", help="writer:reader pairs, comma-separated (default: see the module's docstring)")
    p.add_argument("--programs", type=int, default=20, help="seeded programs per writer (default 20)")
    p.add_argument("--steps", type=int, default=150, help="steps per program (default 150)")
    p.add_argument("--out", help="where the snapshots go (default: a temporary directory)")
    p.add_argument("--forms", default="checkpoint,canonical,native",
                   help="which snapshots the matrix shows: checkpoint, canonical (savepoints), native (savepoints); "
                        "default all three")
    p.add_argument("--write", help=argparse.SUPPRESS)  # one writer in this process
    p.add_argument("--read", nargs=2, help=argparse.SUPPRESS)  # one reader: VERSION DIR
    args = p.parse_args(argv)
    if args.write:
        from cowcheck.flink.releases import select_release

        if args.write != REFERENCE:
            select_release(args.write)
        print(json.dumps(write(args.write, args.programs, args.steps, Path(args.out))))
        return 0
    if args.read:
        print(json.dumps(read(args.read[0], Path(args.read[1]))))
        return 0
    if args.pairs:
        pairs = [tuple(pair.split(":")) for pair in args.pairs.split(",")]
    else:
        pairs = pairs_of([v.strip() for v in args.versions.split(",") if v.strip()])
    forms = [f.strip() for f in args.forms.split(",")]
    root = Path(args.out or tempfile.mkdtemp(prefix="cowcheck-releases-"))
    print(f"snapshots across releases: {args.programs} programs of {args.steps} steps per writer, {len(pairs)} "
          f"pairs, snapshots in {root}")
    written = {}
    for writer in sorted({w for w, _ in pairs}, key=_order):
        try:
            written[writer] = _one("--write", writer, "--programs", str(args.programs), "--steps", str(args.steps),
                                   "--out", str(root / writer))
        except RuntimeError as exc:
            written[writer] = {"error": str(exc)}
        w = written[writer]
        by_form = ", ".join(f"{n} {form}" for form, n in sorted(w.get("forms", {}).items()))
        print(f"  written by {writer}: " + (f"{w['checkpoints']} snapshots ({by_form}) of {w['programs']} programs "
                                            f"({w['failed']} programs stopped by a failure on the writer)"
                                            if "error" not in w else f"could not run: {w['error']}"))
    bad = 0
    header = ["writer", "reader", "form", "snapshots", "restore to the model", "differ", "cannot restore"]
    rows, notes = [], []
    for writer, reader in pairs:
        if "error" in written.get(writer, {}):
            rows.append([writer, reader, "-", "-", "-", "-", "writer failed"])
            bad += 1
            continue
        try:
            r = _one("--read", reader, str(root / writer))
        except RuntimeError as exc:
            rows.append([writer, reader, "-", "-", "-", "-", f"reader failed: {exc}"])
            bad += 1
            continue
        for form in forms:
            counts = r["forms"].get(form)
            if counts is None:
                continue
            differ, unrestorable = len(counts["different"]), len(counts["unrestorable"])
            bad += bool(differ or unrestorable)
            rows.append([writer, reader, form, str(counts["checkpoints"]), str(counts["same"]), str(differ),
                         str(unrestorable)])
            notes += [f"{writer} -> {reader} ({form}): {d}" for d in (counts["different"][:2] + counts["unrestorable"][:2])]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    for note in notes:
        print(f"  {note}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
