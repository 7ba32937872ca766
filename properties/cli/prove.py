"""``cowcheck prove``: CrossHair on the contracts of the pure layout and hashing functions.

The runner is :mod:`cowcheck.core.contracts`. Exit codes: 0 nothing
refuted, 1 a contract is refuted, 2 bad usage or CrossHair could not check one
of the user's own contracts (one line on stderr), 3 CrossHair could not check
a contract cowcheck ships (an internal error: one line, details in a file).
"""

from __future__ import annotations

import os
import time
from typing import TextIO

from cowcheck.cli.common import count_arg, one_line, seconds_arg
from cowcheck.core import bounds
from cowcheck.core.contracts import (
    CONFIRMED,
    DEFAULT_PER_CONDITION_TIMEOUT,
    DEFAULT_TARGETS,
    ERROR,
    NO_COUNTEREXAMPLE,
    REFUTED,
    ContractResult,
    count_label,
    find_contracts,
    format_result,
    label,
    run_contracts,
    shown,
)
from cowcheck.core.errors import InternalError, UsageError

__all__ = ["register", "prove"]


# ----------------------------------------------------------------- command

def register(sub) -> None:
    p = sub.add_parser("prove", help="check the layout and hashing contracts with CrossHair",
                       description="Run CrossHair on the PEP 316 contracts (pre:/post: docstring lines) of "
                                   "cowcheck.reference.layout and cowcheck.reference.hashing, or of the given modules or .py "
                                   "files; report each as confirmed, no counterexample within budget, or "
                                   "refuted with a counterexample. Exit 0: nothing refuted, 1: a contract "
                                   "is refuted, 2: bad usage or CrossHair could not check a contract.")
    p.add_argument("targets", nargs="*", metavar="MODULE_OR_FILE",
                   help=f"modules or .py files (default: {' '.join(DEFAULT_TARGETS)})")
    p.add_argument("--only", action="append", metavar="FUNCTION", help="check only this function (repeatable)")
    p.add_argument("--per-condition-timeout", type=seconds_arg(bounds.MAX_STEP_SECONDS), default=DEFAULT_PER_CONDITION_TIMEOUT,
                   metavar="SECONDS",
                   help=f"CPU seconds CrossHair may spend per condition (default {DEFAULT_PER_CONDITION_TIMEOUT:g})")
    p.add_argument("--workers", type=count_arg(bounds.MAX_WORKERS), default=min(4, os.cpu_count() or 1),
                   help="CrossHair processes at a time (default: CPUs, at most 4)")
    p.add_argument("-v", "--verbose", action="store_true", help="print CrossHair's line for every condition")
    p.add_argument("--list", action="store_true", help="list the contracts and exit")
    p.set_defaults(handler=prove)


def prove(args, stdout: TextIO, stderr: TextIO) -> int:
    targets = args.targets or list(DEFAULT_TARGETS)
    contracts = [c for t in targets for c in find_contracts(t)]
    if args.only:
        unknown = sorted(set(args.only) - {c.function for c in contracts})
        if unknown:
            raise UsageError(f"prove: no contract named {', '.join(unknown)} in {', '.join(targets)}")
        contracts = [c for c in contracts if c.function in args.only]
    if not contracts:
        raise UsageError(f"prove: no pre:/post: contracts in {', '.join(targets)}")
    width = max(len(label(c)) for c in contracts)
    if args.list:
        for c in contracts:
            stdout.write(f"{label(c):<{width}}  {shown(c.path)}:{c.line}\n")
        return 0
    stdout.write(f"cowcheck prove: {count_label(len(contracts))} in {', '.join(targets)}; CrossHair, "
                 f"{args.per_condition_timeout:g} s per condition, {args.workers} at a time\n")
    start = time.monotonic()

    def show(result: ContractResult) -> None:
        stdout.write(format_result(result, width, verbose=args.verbose))
        stdout.flush()

    results = run_contracts(contracts, args.per_condition_timeout, args.workers, on_result=show)
    counts = {v: sum(r.verdict == v for r in results) for v in (CONFIRMED, NO_COUNTEREXAMPLE, REFUTED, ERROR)}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n or v != ERROR)
    stdout.write(f"{count_label(len(results))}: {summary} ({time.monotonic() - start:.1f} s)\n")
    if counts[REFUTED]:
        return 1
    errors = [r for r in results if r.verdict == ERROR]
    shipped = [r for r in errors if r.contract.module in DEFAULT_TARGETS]
    if shipped:
        # CrossHair could not check a contract cowcheck ships: cowcheck's error, not the user's (exit 3).
        raise InternalError(f"prove: {label(shipped[0].contract)}: {one_line(shipped[0].detail)}",
                            "".join(f"{label(r.contract)}: {r.detail}\n" for r in errors))
    for r in errors:  # the user's own contracts: a bad condition or an import error is bad input
        stderr.write(f"cowcheck: error: prove: {label(r.contract)}: {one_line(r.detail)}\n")
    return 2 if errors else 0


