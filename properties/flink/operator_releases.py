"""Operator-state checkpoints across releases: written by one (the reference or a Flink release), restored by another.

``python -m cowcheck.flink.operator_releases [--pairs X:Y,...] [--programs N] [--steps S]`` runs, per
writer X (one process each: one JVM, one release), ``N`` seeded walks of the operator machine, every
checkpoint's asynchronous parts on the task thread, compressed or not as the walk chooses (1.18.0 on),
and records every completed checkpoint before the writer's own check: each instance's handle
(described as text: per state its mode and offsets, then the bytes or the file, which stays on disk)
and the model frozen at its synchronous part. Per reader Y (one process each) every recorded
checkpoint is rebuilt, repartitioned by Y's own repartitioner for 1 to 10 instances (the n-th
record at ``1 + (n * 7 + seed) % 10``), restored, its ten states registered again, and compared
with the model as the operator harness compares a restore (O3/O4: multisets, sizes, union lists,
broadcast maps).

``reference`` stands for the reference's operator backend (Flink 2.3.0's format and behaviour). A
difference is *explained* when a finding of docs/findings/ accounts for it: a compressed checkpoint
written or read by 1.18.x (FLINK-34063: its offsets point into a snappy chunk, and its reader opens a
snappy stream per state where there is none), or a list state holding a
null string, which releases before 1.19.0 take and checkpoint and no release restores. Exit 0 if no
pair has an unexplained difference, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from cowcheck.core.processes import module_command

__all__ = ["write", "read", "main", "REFERENCE", "encode_frozen", "decode_frozen"]

REFERENCE = "reference"


def _before(version: str, parts: tuple) -> bool:
    from cowcheck.flink.releases import parse_version

    return version != REFERENCE and parse_version(version) < parts


def encode_frozen(frozen: list) -> list:
    """A frozen job as JSON: per instance, per state its list, or its map as [key, value] pairs."""
    return [{name: ([[k, v] for k, v in value.items()] if isinstance(value, dict) else value)
             for name, value in states.items()} for states in frozen]


def decode_frozen(data: list) -> list:
    from cowcheck.operator.ops import SPECS

    return [{name: ({k: v for k, v in value} if SPECS[name].broadcast else value) for name, value in states.items()}
            for states in data]


def _factory(version: str):
    if version == REFERENCE:
        from cowcheck.reference.operator import OperatorStateBackends

        return OperatorStateBackends, lambda handle: handle.describe()
    from cowcheck.core.impls import resolve
    from cowcheck.flink.jvm import Java

    impl = resolve(f"flink@{version}", "operator")
    # Looked up when called: the JVM starts with the first backend.
    return impl.factory, lambda handle: str(Java.jpype.JClass("cowcheck.bridge.OperatorHandle").describe(handle.java))


def write(version: str, programs: int, steps: int, out: Path) -> dict:
    """In this process: the walks on ``version``, their checkpoints recorded under ``out``."""
    import cowcheck.flink  # noqa: F401
    import cowcheck.registry  # noqa: F401
    from cowcheck.core.failures import CheckFailure
    from cowcheck.core.limits import limited
    from cowcheck.operator.harness import OperatorHarness
    from cowcheck.operator.walks import walk_program
    from cowcheck.reference.checkpoint import CheckpointStreamFactory

    factory, describe = _factory(version)
    compression = not _before(version, (1, 18, 0))
    records, failed = [], []

    class Writer(OperatorHarness):
        """The operator harness, file checkpoints kept in ``out``, each completed checkpoint recorded first."""

        seed = 0

        def _streams(self, target: str):
            if target == "memory":
                return CheckpointStreamFactory()
            self.coverage["checkpoint-file"] += 1
            return CheckpointStreamFactory(str(out / "files"), threshold=0)

        def _check_restore(self, step, cid, parallelism, reregister=""):
            if cid not in self.recorded:  # the first check of a checkpoint is its completion's
                self.recorded.add(cid)
                frozen, _, old = self.frozen[cid]
                records.append({"seed": self.seed, "cid": cid, "parallelism": old, "compressed": self.compressed[cid],
                                "handles": [None if h is None else describe(h) for h in self.handles[cid]],
                                "frozen": encode_frozen(frozen)})
            return super()._check_restore(step, cid, parallelism, reregister)

        def _take(self, step, cid, compressed, target, seed=None, savepoint=False):
            self.compressed[cid] = bool(compressed)
            return super()._take(step, cid, compressed, target, seed, savepoint)

    (out / "files").mkdir(parents=True, exist_ok=True)
    with limited(60.0):
        for seed in range(programs):
            harness = Writer(factory(), async_part="inline", compression=compression)
            harness.seed, harness.compressed, harness.recorded = seed, {}, set()
            try:
                for step in walk_program(seed, steps, compression):
                    harness.apply(step)
            except CheckFailure as exc:
                failed.append({"seed": seed, "failure": f"{exc.failure.kind} {exc.failure.code}: "
                                                       f"{exc.failure.message[:200]}"})
            finally:
                harness.close()
    (out / "records.json").write_text(json.dumps({"version": version, "records": records, "failed": failed}))
    return {"version": version, "checkpoints": len(records), "programs": programs, "failed": len(failed),
            "compressed": sum(r["compressed"] for r in records)}


def _in_1_18(version: str) -> bool:
    return not _before(version, (1, 18, 0)) and _before(version, (1, 19, 0))


def _explained(writer: str, reader: str, record: dict) -> str | None:
    """The finding that accounts for a difference on ``record``, if one does."""
    if record["compressed"] and (_in_1_18(writer) or _in_1_18(reader)):
        return "FLINK-34063"
    if _before(writer, (1, 19, 0)) and any(v is None for states in record["frozen"] for name, value in states.items()
                                           if name.startswith(("split_string", "union_string")) for v in value):
        return "null string in a list state"
    return None


def read(version: str, written: Path) -> dict:
    """In this process: every checkpoint recorded in ``written`` restored by ``version``."""
    import cowcheck.flink  # noqa: F401
    import cowcheck.registry  # noqa: F401
    from cowcheck.core.failures import CheckFailure
    from cowcheck.core.program import Step
    from cowcheck.model.operator_model import OperatorModel
    from cowcheck.operator.harness import OperatorHarness
    from cowcheck.operator.ops import STATES

    if version == REFERENCE:
        from cowcheck.reference.operator import OperatorStateBackends, OperatorStreamStateHandle

        factory, rebuild = OperatorStateBackends, OperatorStreamStateHandle.rebuild
    else:
        from cowcheck.flink.jvm import Java
        from cowcheck.flink.operator import FlinkOperatorHandle

        factory, _ = _factory(version)
        factory()  # the JVM, before the helper's class is looked up
        java_rebuild = Java.jpype.JClass("cowcheck.bridge.OperatorHandle").rebuild
        rebuild = lambda text, name: FlinkOperatorHandle(java_rebuild(text, name))  # noqa: E731
    data = json.loads((written / "records.json").read_text())
    writer = data["version"]
    out = {"writer": writer, "reader": version, "checkpoints": 0, "same": 0, "explained": {}, "different": [],
           "parallelisms": {}}
    for n, record in enumerate(data["records"]):
        out["checkpoints"] += 1
        target = 1 + (n * 7 + record["seed"]) % 10
        out["parallelisms"][target] = out["parallelisms"].get(target, 0) + 1
        harness = OperatorHarness(factory())
        harness.model = OperatorModel(STATES, record["parallelism"])
        harness.frozen[0] = (decode_frozen(record["frozen"]), True, record["parallelism"])
        harness.handles[0] = [None if text is None else rebuild(text, f"s{record['seed']}-{record['cid']}-{i}")
                              for i, text in enumerate(record["handles"])]
        step = Step("restore", (0, target))
        harness.steps.append(step)
        try:
            backends, _, _ = harness._check_restore(step, 0, target)
            harness._dispose(step, backends)
        except CheckFailure as exc:
            why = _explained(writer, version, record)
            if why is not None:
                out["explained"][why] = out["explained"].get(why, 0) + 1
            else:
                out["different"].append(f"seed {record['seed']} c{record['cid']} at {target}: "
                                        f"{exc.failure.code} {exc.failure.message[:300]}")
            continue
        finally:
            harness.close()
        out["same"] += 1
    return out


def _one(*args: str) -> dict:
    run = subprocess.run(module_command("cowcheck.flink.operator_releases", *args), capture_output=True, text=True)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        tail = [line for line in run.stderr.splitlines() if line.strip()]
        raise RuntimeError(tail[-1] if tail else f"exit {run.returncode}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.operator_releases", description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default="reference:2.3.0,2.3.0:reference,reference:1.18.1,1.18.1:reference",
                   help="writer:reader pairs, comma-separated (default: the reference against 2.3.0 and 1.18.1, both "
                        "ways)")
    p.add_argument("--programs", type=int, default=50, help="seeded programs per writer (default 50)")
    p.add_argument("--steps", type=int, default=80, help="steps per program (default 80)")
    p.add_argument("--out", help="where the checkpoints go (default: a temporary directory)")
    p.add_argument("--write", help=argparse.SUPPRESS)
    p.add_argument("--read", nargs=2, help=argparse.SUPPRESS)
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
    pairs = [tuple(pair.split(":")) for pair in args.pairs.split(",")]
    root = Path(args.out or tempfile.mkdtemp(prefix="cowcheck-operator-releases-"))
    print(f"operator-state checkpoints across releases: {args.programs} programs of {args.steps} steps per writer, "
          f"{len(pairs)} pairs, checkpoints in {root}")
    written = {}
    for writer in dict.fromkeys(w for w, _ in pairs):
        try:
            written[writer] = _one("--write", writer, "--programs", str(args.programs), "--steps", str(args.steps),
                                   "--out", str(root / writer))
        except RuntimeError as exc:
            written[writer] = {"error": str(exc)}
        w = written[writer]
        print(f"  written by {writer}: " + (f"{w['checkpoints']} checkpoints ({w['compressed']} compressed) of "
                                            f"{w['programs']} programs ({w['failed']} stopped by a failure on the "
                                            f"writer)" if "error" not in w else f"could not run: {w['error']}"))
    bad = 0
    header = ["writer", "reader", "checkpoints", "restore to the model", "explained", "unexplained"]
    rows, notes = [], []
    for writer, reader in pairs:
        if "error" in written.get(writer, {}):
            rows.append([writer, reader, "-", "-", "-", "writer failed"])
            bad += 1
            continue
        try:
            r = _one("--read", reader, str(root / writer))
        except RuntimeError as exc:
            rows.append([writer, reader, "-", "-", "-", f"reader failed: {exc}"])
            bad += 1
            continue
        bad += bool(r["different"])
        explained = ", ".join(f"{n} {why}" for why, n in r["explained"].items()) or "0"
        rows.append([writer, reader, str(r["checkpoints"]), str(r["same"]), explained, str(len(r["different"]))])
        notes += [f"{writer} -> {reader}: {d}" for d in r["different"][:3]]
        notes.append(f"{writer} -> {reader}: restored at parallelism " + ", ".join(
            f"{k}: {v}" for k, v in sorted(r["parallelisms"].items(), key=lambda kv: int(kv[0]))))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    for note in notes:
        print(f"  {note}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
