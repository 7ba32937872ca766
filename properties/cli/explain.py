"""``cowcheck explain [CODE]``: what a failure's code means, from the contract.

Every failure line names a code (``DIVERGENCE P6``, ``TIMEOUT time-limit``)
and points here. ``cowcheck explain P6`` prints that code's entry of
docs/contract.md, read from the copy installed with the package
(:mod:`cowcheck.core.contract`): the rule, the harm, how the suite checks
it, a program that breaks it and the usual causes. Without a code it lists
every code with its title. Codes are matched without regard to case, and a
kind in front (``INVARIANT I9``, as pasted from a failure line) is skipped;
an unknown code is bad usage (exit 2) with the closest codes and the list.
"""

from __future__ import annotations

from typing import TextIO

from cowcheck.core.contract import CONTRACT, entries, render, similar
from cowcheck.core.errors import UsageError
from cowcheck.core.failures import KINDS

__all__ = ["register", "explain"]

_KINDS = KINDS + ("INTERNAL",)  # a campaign's seeds add INTERNAL (cowcheck's own error)


def register(sub) -> None:
    p = sub.add_parser("explain", help="what a failure's code means (the contract's entry for it)",
                       description=f"Print the entry of {CONTRACT} for a code a failure carries (P1..P7, "
                                   "I0..I9, A1..A11, C1..C5, T1..T3, time-limit, ...): the rule, the harm, "
                                   "how it is checked, a program that breaks it, the usual causes. Without "
                                   "a code, list the codes. Exit 0, or 2 for an unknown code.")
    p.add_argument("code", nargs="*", metavar="CODE",
                   help="a code, as a failure prints it, with or without its kind (INVARIANT I9); any case")
    p.set_defaults(handler=explain)


def explain(args, stdout: TextIO, stderr: TextIO) -> int:
    known = entries()
    words = list(args.code)
    if len(words) == 2 and words[0].upper() in _KINDS:  # pasted from a failure line: "INVARIANT I9"
        words = words[1:]
    if len(words) > 1:
        raise UsageError(f"one code at a time, got {' '.join(words)!r}")
    if not words:
        width = max(len(code) for code in known)
        stdout.write(f"Codes of the contract ({CONTRACT}); `cowcheck explain CODE` for one:\n")
        for code, entry in known.items():
            stdout.write(f"  {code:<{width}}  §{entry.section.split('.', 1)[0]:<3} {entry.title}\n")
        return 0
    asked = words[0].strip()
    by_case = {code.lower(): code for code in known}
    code = by_case.get(asked.lower())
    if code is None:
        if asked.upper() in _KINDS:
            raise UsageError(f"{asked.upper()} is a kind of failure, not a code: the code follows it on the "
                             f"failure line (e.g. DIVERGENCE P6); kinds are in {CONTRACT} §16")
        close = similar(asked, known)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(f"unknown code {asked!r}; {hint}known codes: {', '.join(known)}")
    stdout.write(render(known[code]) + "\n")
    return 0
