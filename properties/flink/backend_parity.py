"""Parity of the keyed backend: the reference against Flink's HeapKeyedStateBackend, release by release.

``python -m cowcheck.flink.backend_parity [--versions 1.13.6,2.3.0] [--programs N] [--steps S] [--coverage]
[--async-part inline|thread]`` runs ``N`` seeded walk programs of the backend machine (the walk
phase's generator) through the backend harness on the reference and on Flink's backend of each
release (one process per release: one JVM, one release), recording every answer the harness gets
(reads, key iteration sorted, every read of every restored backend). Both are checked against the
model step by step (K1–K10), null map values left out (every release's canonical savepoint fails
on them: a finding), and so are upgrades switching TTL on a release that refuses them (the
reference migrates them);
a program *differs* when the two verdicts differ (pass, or the
failure's kind, code and step) or when the answers differ anywhere. Asynchronous parts run on
the task thread by default: on a thread of their own, when a checkpoint's snapshot transformer
reads the clock depends on the threads' timing, and so do the expired keys a restore may
still list (both within the model's bounds), so answers may differ between two correct backends. Exit 0 if no program differs,
1 otherwise; each difference is printed with its seed, its step and both answers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Optional

from cowcheck.backend.harness import BACKEND_SCENARIOS
from cowcheck.core.processes import module_command

__all__ = ["run_program", "first_difference", "tally", "run_programs", "main"]


def run_program(harness, steps):
    """(verdict, answers, coverage) of ``steps``: verdict None, or the failure's [kind, code, step]."""
    from cowcheck.core.errors import InternalError
    from cowcheck.core.failures import CheckFailure

    verdict = None
    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        verdict = [exc.failure.kind, exc.failure.code, exc.failure.step_index]
    except InternalError as exc:
        verdict = ["INTERNAL", str(exc)[:200], -1]
    finally:
        harness.close()
    return verdict, harness.observed, harness.coverage


def first_difference(a: list, b: list):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    if len(a) != len(b):
        i = min(len(a), len(b))
        return i, a[i] if i < len(a) else "(nothing)", b[i] if i < len(b) else "(nothing)"
    return None


def _refused_by(settings: dict, step) -> bool:
    """An upgrade switching TTL on a release that refuses it (before 2.2): the reference, a port of
    2.3.0, migrates it and goes on with another backend, so the two runs part there by design."""
    return step.op == "upgrade" and step.args[2] == "flipped" and not settings.get("ttl_migration", True)


def run_programs(version: str, programs: int, steps: int, async_part: str, first_seed: int = 0) -> dict:
    """In this process: ``programs`` walks on the reference and on ``flink@version``."""
    import cowcheck.flink  # noqa: F401  (registers the flink resolver)
    import cowcheck.registry  # noqa: F401
    from cowcheck.backend import reference_state_backend
    from cowcheck.backend.harness import BackendHarness
    from cowcheck.backend.walks import walk_program
    from cowcheck.core.impls import resolve
    from cowcheck.core.limits import limited

    from cowcheck.flink.backend import LEFT_OUT_OF_COMPARISONS

    flink = resolve(f"flink@{version}", "backend")
    settings = dict(flink.config_defaults)
    out = {"version": version, "programs": 0, "steps": 0, "same": 0, "failed_both": 0, "answers": 0,
           "differences": [], "seconds": {"reference": 0.0, "flink": 0.0}, "coverage": {}}
    with limited(30.0):
        for seed in range(first_seed, first_seed + programs):
            program = [step for step in walk_program(seed, steps, native_savepoints=settings.get("native_savepoints", True))
                       if step.op not in LEFT_OUT_OF_COMPARISONS and not _refused_by(settings, step)]
            runs = {}
            for name, factory in (("reference", reference_state_backend), ("flink", flink.factory)):
                started = time.perf_counter()
                options = settings if name == "flink" else {"native_savepoints": settings.get("native_savepoints", True)}
                runs[name] = run_program(BackendHarness(factory(), async_part=async_part, observe=True, **options), program)
                out["seconds"][name] += time.perf_counter() - started
            out["programs"] += 1
            out["steps"] += len(program)
            out["answers"] += len(runs["flink"][1])
            for scenario, hits in runs["flink"][2].items():
                out["coverage"][scenario] = out["coverage"].get(scenario, 0) + hits
            tally(out, seed, runs)
    return out


def tally(out: dict, seed: int, runs: dict, shown: Optional[int] = None) -> None:
    """Count one program's two runs (``runs["reference"]``, ``runs["flink"]``: :func:`run_program`'s
    results) in ``out``: the same verdict and answers, or the difference (answers shown to ``shown``
    characters)."""
    (ref_verdict, ref_answers, _), (flink_verdict, flink_answers, _) = runs["reference"], runs["flink"]
    differs = first_difference(ref_answers, flink_answers)
    if ref_verdict == flink_verdict and differs is None:
        out["same"] += 1
        out["failed_both"] += ref_verdict is not None
        return
    difference = {"seed": seed, "reference": ref_verdict, "flink": flink_verdict}
    if differs is not None:
        i, x, y = differs
        difference["answer"] = {"step": ref_answers[i][0] if i < len(ref_answers) else -1,
                                "reference": repr(x)[:shown], "flink": repr(y)[:shown]}
    out["differences"].append(difference)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.backend_parity",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default="2.3.0", help="Flink releases, comma-separated (default 2.3.0)")
    p.add_argument("--programs", type=int, default=200, help="seeded programs per release (default 200)")
    p.add_argument("--steps", type=int, default=200, help="steps per program (default 200)")
    p.add_argument("--async-part", choices=["inline", "thread"], default="inline",
                   help="where checkpoints' asynchronous parts run (default inline: the answers are deterministic)")
    p.add_argument("--coverage", action="store_true",
                   help="print the scenarios the walks reached on each release, as check prints them")
    p.add_argument("--one", help=argparse.SUPPRESS)  # run one release in this process, print JSON
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(run_programs(args.one, args.programs, args.steps, args.async_part)))
        return 0
    differ = 0
    print(f"backend parity: reference vs Flink's HeapKeyedStateBackend, {args.programs} programs of {args.steps} "
          f"steps per release, asynchronous parts {args.async_part}")
    for version in args.versions.split(","):
        run = subprocess.run(module_command("cowcheck.flink.backend_parity", "--one", version, "--programs",
                                            str(args.programs), "--steps", str(args.steps), "--async-part",
                                            args.async_part), capture_output=True, text=True)
        if run.returncode != 0:
            print(f"  {version}: could not run: {run.stderr.strip().splitlines()[-1] if run.stderr else run.returncode}")
            differ += 1
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        differ += len(r["differences"])
        print(f"  {version}: {r['programs']} programs, {r['steps']:,} steps, {r['answers']:,} answers compared: "
              f"{r['same']} same ({r['failed_both']} failing on both), {len(r['differences'])} different; "
              f"reference {r['seconds']['reference']:.1f} s, Flink {r['seconds']['flink']:.1f} s")
        reached = [name for name in BACKEND_SCENARIOS if r["coverage"].get(name)]
        print(f"    scenarios reached on Flink {version}: {len(reached)}/{len(BACKEND_SCENARIOS)}; never: "
              f"{', '.join(name for name in BACKEND_SCENARIOS if name not in reached) or 'none'}")
        if args.coverage:
            for name, description in BACKEND_SCENARIOS.items():
                print(f"      {description:<90} {r['coverage'].get(name, 0):>7,}")
        for d in r["differences"][:5]:
            answer = d.get("answer")
            where = (f"; first different answer at step {answer['step']}: reference {answer['reference']}, "
                     f"Flink {answer['flink']}") if answer else ""
            print(f"    seed {d['seed']}: reference {d['reference']}, Flink {d['flink']}{where}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
