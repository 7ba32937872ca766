"""Every machine of the suite, registered: import this to look any machine up by name.

Each machine package registers itself with :mod:`cowcheck.core.machine`
when imported; code that handles programs of any machine (the command line,
a Spark executor replaying stored counterexamples) imports this module
first. :func:`trace` is :func:`cowcheck.core.replay.trace_of` from here, so
that a process that only unpickles it (a Spark executor) registers every
machine before reading a file.

>>> sorted(MACHINES)
['async', 'backend', 'checkpoint', 'map', 'operator', 'table']
"""

from __future__ import annotations

import cowcheck.async_exec  # noqa: F401  (registers the async machine)
import cowcheck.backend  # noqa: F401  (registers the backend machine)
import cowcheck.checkpoint  # noqa: F401  (registers the checkpoint machine)
import cowcheck.map  # noqa: F401  (registers the map machine)
import cowcheck.operator  # noqa: F401  (registers the operator machine)
import cowcheck.table  # noqa: F401  (registers the table machine)
from cowcheck.core.machine import MACHINES, machine_kind
from cowcheck.core.replay import trace_of

__all__ = ["MACHINES", "DEFAULT_MACHINE", "machine_kind", "trace"]

DEFAULT_MACHINE = "map"  # what a command checks when no --machine is given


def trace(path, impl_spec: str | None = None, diagrams: bool = True) -> str:
    """The step-by-step trace of a counterexample file of any machine (see ``trace_of``)."""
    return trace_of(path, impl_spec, diagrams)
