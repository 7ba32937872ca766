"""Every machine of the suite, registered: import this to look any machine up by name.

Each machine package registers itself with :mod:`properties.core.machine`
when imported; code that handles programs of any machine (the command line,
a Spark executor replaying stored counterexamples) imports this module
first. :func:`trace` is :func:`properties.core.replay.trace_of` from here, so
that a process that only unpickles it (a Spark executor) registers every
machine before reading a file.

>>> sorted(MACHINES)
['async', 'backend', 'checkpoint', 'map', 'table']
"""

from __future__ import annotations

import properties.async_exec  # noqa: F401  (registers the async machine)
import properties.backend  # noqa: F401  (registers the backend machine)
import properties.checkpoint  # noqa: F401  (registers the checkpoint machine)
import properties.map  # noqa: F401  (registers the map machine)
import properties.table  # noqa: F401  (registers the table machine)
from properties.core.machine import MACHINES, machine_kind
from properties.core.replay import trace_of

__all__ = ["MACHINES", "DEFAULT_MACHINE", "machine_kind", "trace"]

DEFAULT_MACHINE = "map"  # what a command checks when no --machine is given


def trace(path, impl_spec: str | None = None, diagrams: bool = True) -> str:
    """The step-by-step trace of a counterexample file of any machine (see ``trace_of``)."""
    return trace_of(path, impl_spec, diagrams)
