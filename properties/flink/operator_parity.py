"""Parity of operator state: the reference against Flink's DefaultOperatorStateBackend, release by release.

``python -m cowcheck.flink.operator_parity [--versions 1.13.6,2.3.0] [--programs N] [--steps S]``
runs ``N`` seeded walk programs of the operator machine through its harness on the reference
(following the release's null handling: ``OperatorStateBackends(release=V)``) and on Flink's backend
of each release (one process per release: one JVM, one release), recording every answer the harness
gets (each read; each restored instance's states, lists as sorted multisets). Both are checked
against the model step by step (O1–O7); a program *differs* when the verdicts differ (pass, or the
failure's kind, code and step) or when the answers differ anywhere. Asynchronous parts run on the
task thread (a racing part's schedule is not deterministic). Operator-state compression is on from
1.19.0, off before (none before 1.18.0; 1.18.x's, FLINK-34063, is a finding of its own:
docs/findings/). Exit 0 if no program differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from cowcheck.core.processes import module_command
from cowcheck.flink.backend_parity import run_program, tally

__all__ = ["run_programs", "main"]


def _compression(version: str) -> bool:
    from cowcheck.flink.releases import parse_version

    return parse_version(version) >= (1, 19, 0)


def run_programs(version: str, programs: int, steps: int, first_seed: int = 0) -> dict:
    """In this process: ``programs`` walks on the reference and on ``flink@version``."""
    import cowcheck.flink  # noqa: F401  (registers the flink resolver)
    import cowcheck.registry  # noqa: F401
    from cowcheck.core.impls import resolve
    from cowcheck.core.limits import limited
    from cowcheck.operator.harness import OperatorHarness
    from cowcheck.operator.walks import walk_program
    from cowcheck.reference.operator import OperatorStateBackends

    flink = resolve(f"flink@{version}", "operator")
    compression = _compression(version)
    out = {"version": version, "programs": 0, "steps": 0, "same": 0, "failed_both": 0, "answers": 0,
           "compression": compression, "differences": [], "seconds": {"reference": 0.0, "flink": 0.0}}
    with limited(30.0):
        for seed in range(first_seed, first_seed + programs):
            program = list(walk_program(seed, steps, compression))
            runs = {}
            for name, factory in (("reference", lambda: OperatorStateBackends(release=version)),
                                  ("flink", flink.factory)):
                started = time.perf_counter()
                runs[name] = run_program(OperatorHarness(factory(), async_part="inline", compression=compression,
                                                  observe=True), program)
                out["seconds"][name] += time.perf_counter() - started
            out["programs"] += 1
            out["steps"] += len(program)
            out["answers"] += len(runs["flink"][1])
            tally(out, seed, runs, shown=300)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cowcheck.flink.operator_parity",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--versions", default="2.3.0", help="Flink releases, comma-separated (default 2.3.0)")
    p.add_argument("--programs", type=int, default=200, help="seeded programs per release (default 200)")
    p.add_argument("--steps", type=int, default=150, help="steps per program (default 150)")
    p.add_argument("--one", help=argparse.SUPPRESS)  # run one release in this process, print JSON
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(run_programs(args.one, args.programs, args.steps)))
        return 0
    differ = 0
    print(f"operator parity: reference vs Flink's DefaultOperatorStateBackend, {args.programs} programs of "
          f"{args.steps} steps per release")
    for version in args.versions.split(","):
        run = subprocess.run(module_command("cowcheck.flink.operator_parity", "--one", version, "--programs",
                                            str(args.programs), "--steps", str(args.steps)),
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"  {version}: could not run: {run.stderr.strip().splitlines()[-1] if run.stderr else run.returncode}")
            differ += 1
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        differ += len(r["differences"])
        print(f"  {version}: {r['programs']} programs, {r['steps']:,} steps, {r['answers']:,} answers compared "
              f"(compression {'on' if r['compression'] else 'off'}): {r['same']} same ({r['failed_both']} failing "
              f"on both), {len(r['differences'])} different; reference {r['seconds']['reference']:.1f} s, Flink "
              f"{r['seconds']['flink']:.1f} s")
        for d in r["differences"][:5]:
            answer = d.get("answer")
            where = (f"; first different answer at step {answer['step']}: reference {answer['reference']}, "
                     f"Flink {answer['flink']}") if answer else ""
            print(f"    seed {d['seed']}: reference {d['reference']}, Flink {d['flink']}{where}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
