"""Parity of the async controller: the reference against Flink's own, release by release.

``python -m properties.flink.async_parity [--versions 2.1.3,2.2.0,2.3.0] [--programs N] [--steps S]
[--mode serial|parallel]`` runs ``N`` seeded async walk programs (the machine's walk phase
generator, non-records included) through the async harness on the reference and on Flink's
``AsyncExecutionController`` of each release (one process per release: one JVM, one release), with
the same config (no buffer timeout: Flink's runs on a wall-clock thread). Both are checked against
the serial model step by step (A1–A11); a program *differs* when the two verdicts differ (pass, or
the failure's kind, code and step) or when both pass with different final states. Exit 0 if no
program differs, 1 otherwise; every difference is printed with its seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from properties.core.processes import module_command

__all__ = ["run_programs", "main"]


def _verdict(harness, steps):
    from properties.core.errors import InternalError
    from properties.core.failures import CheckFailure

    try:
        for step in steps:
            harness.apply(step)
    except CheckFailure as exc:
        return [exc.failure.kind, exc.failure.code, exc.failure.step_index], None
    except InternalError as exc:
        return ["INTERNAL", str(exc)[:200], -1], None
    finally:
        harness.close()
    return None, sorted(map(list, harness.backend.items()))


def run_programs(version: str, programs: int, steps: int, mode: str, first_seed: int = 0) -> dict:
    """In this process: ``programs`` walks on the reference and on ``flink@version``."""
    import properties.flink  # noqa: F401  (registers the flink resolver)
    import properties.machines  # noqa: F401
    from properties.async_exec.harness import AsyncHarness, AsyncMachineConfig
    from properties.async_exec.walks import walk_program
    from properties.core.impls import resolve
    from properties.core.limits import limited
    from reference.async_execution import AsyncExecutionController

    flink = resolve(f"flink@{version}", "async")
    config = AsyncMachineConfig(buffer_timeout=0, epoch_mode=mode)
    out = {"version": version, "programs": 0, "steps": 0, "same": 0, "failed_both": 0, "differences": [],
           "seconds": {"reference": 0.0, "flink": 0.0}}
    with limited(10.0):
        for seed in range(first_seed, first_seed + programs):
            program = list(walk_program(seed, steps, config))
            verdicts = {}
            for name, factory in (("reference", AsyncExecutionController), ("flink", flink.factory)):
                started = time.perf_counter()
                verdicts[name] = _verdict(AsyncHarness(factory, config), program)
                out["seconds"][name] += time.perf_counter() - started
            out["programs"] += 1
            out["steps"] += len(program)
            if verdicts["reference"] == verdicts["flink"]:
                out["same"] += 1
                out["failed_both"] += verdicts["reference"][0] is not None
            else:
                out["differences"].append({"seed": seed, "reference": verdicts["reference"][0],
                                           "flink": verdicts["flink"][0]})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m properties.flink.async_parity", description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default="2.3.0", help="Flink releases, comma-separated (2.1.0 or newer; default 2.3.0)")
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
        run = subprocess.run(module_command("properties.flink.async_parity", "--one", version, "--programs",
                                            str(args.programs), "--steps", str(args.steps), "--mode", args.mode),
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"  {version}: could not run: {run.stderr.strip().splitlines()[-1] if run.stderr else run.returncode}")
            differ += 1
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        differ += len(r["differences"])
        print(f"  {version}: {r['programs']} programs, {r['steps']:,} steps: {r['same']} same verdict "
              f"({r['failed_both']} failing on both), {len(r['differences'])} different; "
              f"reference {r['seconds']['reference']:.1f} s, Flink {r['seconds']['flink']:.1f} s")
        for d in r["differences"][:5]:
            print(f"    seed {d['seed']}: reference {d['reference']}, Flink {d['flink']}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
