"""Parity of the async controller: the reference against Flink's own, release by release.

``python -m cowcheck.flink.async_parity [--versions 1.20.0,2.0.0,2.3.0] [--programs N] [--steps S]
[--mode serial|parallel]`` runs ``N`` seeded async walk programs (the machine's walk phase
generator, non-records and their timers included) through the async harness on the reference and
on Flink's ``AsyncExecutionController`` of each release (one process per release: one JVM, one
release), with the same settings (no buffer timeout: Flink's runs on a wall-clock thread), each
side with what it has (a release without final actions or overdraft is checked without them, as
``check`` does). Both are checked against the serial model step by step (A1–A11); a program
*differs* when the two verdicts differ (pass, or the failure's kind, code and step) or when both
pass with different final states. Exit 0 if no program differs, 1 otherwise; every difference is
printed with its seed and both failures, and the differences are counted by the pair of verdicts
(kind and code on each side), which is how they are matched with the findings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from cowcheck.core.processes import module_command

__all__ = ["run_programs", "main"]


def _verdict(harness, steps):
    from cowcheck.core.errors import InternalError
    from cowcheck.core.failures import CheckFailure

    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        return [exc.failure.kind, exc.failure.code, exc.failure.step_index, exc.failure.message[:160]], None
    except InternalError as exc:
        return ["INTERNAL", str(exc)[:200], -1], None
    finally:
        harness.close()
    return None, sorted(map(list, harness.backend.items()))


def _same(a, b) -> bool:
    """Same verdict: both pass with the same final state, or both fail with the same kind, code and step."""
    return a[1] == b[1] and (a[0] is None) == (b[0] is None) and (a[0] is None or a[0][:3] == b[0][:3])


def run_programs(version: str, programs: int, steps: int, mode: str, first_seed: int = 0) -> dict:
    """In this process: ``programs`` walks on the reference and on ``flink@version``."""
    import cowcheck.flink  # noqa: F401  (registers the flink resolver)
    import cowcheck.registry  # noqa: F401
    from cowcheck.async_exec.harness import AsyncHarness, AsyncMachineConfig
    from cowcheck.async_exec.walks import walk_program
    from cowcheck.core.impls import resolve
    from cowcheck.core.limits import limited
    from cowcheck.reference.async_execution import AsyncExecutionController

    from cowcheck.core.machine import machine_kind

    flink = resolve(f"flink@{version}", "async")
    configs = {"reference": AsyncMachineConfig(buffer_timeout=0, epoch_mode=mode),
               "flink": machine_kind("async").config_for(flink, buffer_timeout=0, epoch_mode=mode)}
    out = {"version": version, "programs": 0, "steps": 0, "same": 0, "failed_both": 0, "differences": [],
           "seconds": {"reference": 0.0, "flink": 0.0}}
    with limited(10.0):
        for seed in range(first_seed, first_seed + programs):
            program = list(walk_program(seed, steps, configs["reference"]))
            verdicts = {}
            for name, factory in (("reference", AsyncExecutionController), ("flink", flink.factory)):
                started = time.perf_counter()
                verdicts[name] = _verdict(AsyncHarness(factory, configs[name]), program)
                out["seconds"][name] += time.perf_counter() - started
            out["programs"] += 1
            out["steps"] += len(program)
            if _same(verdicts["reference"], verdicts["flink"]):
                out["same"] += 1
                out["failed_both"] += verdicts["reference"][0] is not None
            else:
                out["differences"].append({"seed": seed, "reference": verdicts["reference"][0],
                                           "flink": verdicts["flink"][0]})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.async_parity", description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default="2.3.0",
                   help="Flink releases, comma-separated (1.20.0 or newer; parallel mode: 2.1.0 or newer; default 2.3.0)")
    p.add_argument("--programs", type=int, default=1000, help="seeded programs per release (default 1000)")
    p.add_argument("--steps", type=int, default=60, help="steps per program (default 60)")
    p.add_argument("--mode", choices=["serial", "parallel"], default="serial", help="epoch mode (default serial)")
    p.add_argument("--one", help=argparse.SUPPRESS)  # run one release in this process, print JSON
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(run_programs(args.one, args.programs, args.steps, args.mode)))
        return 0
    differ = 0
    print(f"async parity: reference vs Flink's AsyncExecutionController, {args.programs} programs of {args.steps} "
          f"steps per release, epoch mode {args.mode}")
    for version in args.versions.split(","):
        run = subprocess.run(module_command("cowcheck.flink.async_parity", "--one", version, "--programs",
                                            str(args.programs), "--steps", str(args.steps), "--mode", args.mode),
                             capture_output=True, text=True)
        if run.returncode != 0:  # the first line says what happened (a traceback's, or faulthandler's "Timeout")
            first = next((line for line in run.stderr.splitlines() if line.strip()), "")
            last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
            print(f"  {version}: could not run (exit {run.returncode}): {first.strip()[:200]}"
                  + (f" ... {last.strip()[:200]}" if last and last != first else ""))
            differ += 1
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        differ += len(r["differences"])
        print(f"  {version}: {r['programs']} programs, {r['steps']:,} steps: {r['same']} same verdict "
              f"({r['failed_both']} failing on both), {len(r['differences'])} different; "
              f"reference {r['seconds']['reference']:.1f} s, Flink {r['seconds']['flink']:.1f} s")
        pairs: dict = {}
        for d in r["differences"]:
            pair = " / ".join(" ".join(v[:2]) if v else "passes" for v in (d["reference"], d["flink"]))
            pairs[pair] = pairs.get(pair, 0) + 1
        for pair, n in sorted(pairs.items(), key=lambda item: -item[1]):
            print(f"    {n} x reference / Flink: {pair}")
        for d in r["differences"][:3]:
            print(f"    seed {d['seed']}: reference {d['reference']}, Flink {d['flink']}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
