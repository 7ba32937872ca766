"""cowcheck: property-based verification of copy-on-write state maps (Flink's CopyOnWriteStateMap and what
is built on it), with a reference implementation and Flink's own classes to check against.

What a user's Python needs is here; everything else stays under its module
(``cowcheck.map``, ``cowcheck.core``, ``cowcheck.reference``, ``cowcheck.flink``...):

- :func:`check` and :func:`replay`: the ``cowcheck check`` / ``cowcheck replay``
  runs, their verdict returned as a :class:`Verdict`;
- :func:`walk_test`: a pytest test running the walk phase on your map's factory;
- the machine factories (:func:`make_map_machine`, :func:`make_table_machine`,
  :func:`make_checkpoint_machine`, :func:`make_backend_machine`,
  :func:`make_async_machine`) and their configs, for Hypothesis's stateful tests;
- :class:`CheckFailure` (what a failing machine raises; ``.failure`` holds kind,
  code, message and step) and :class:`UsageError`.

``python -m cowcheck`` is the command line. Names are imported on first use, so
``import cowcheck.reference`` stays as light as the port itself.

>>> import cowcheck
>>> cowcheck.__version__
'0.2.0'
>>> sorted(set(cowcheck.__all__) - set(dir(cowcheck)))
[]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.2.0"

__all__ = [
    "__version__", "check", "replay", "Verdict", "walk_test",
    "make_map_machine", "MachineConfig", "make_table_machine", "TableMachineConfig",
    "make_checkpoint_machine", "CheckpointMachineConfig", "make_backend_machine", "BackendMachineConfig",
    "make_async_machine", "AsyncMachineConfig", "CheckFailure", "UsageError",
]

if TYPE_CHECKING:  # what the names below are, for type checkers and editors
    from cowcheck.async_exec import AsyncMachineConfig, make_async_machine
    from cowcheck.backend import BackendMachineConfig, make_backend_machine
    from cowcheck.checking import Verdict, check, replay
    from cowcheck.checkpoint import CheckpointMachineConfig, make_checkpoint_machine
    from cowcheck.core.errors import UsageError
    from cowcheck.core.failures import CheckFailure
    from cowcheck.map import MachineConfig, make_map_machine, walk_test
    from cowcheck.table import TableMachineConfig, make_table_machine


def __getattr__(name: str):
    """The public names, imported when first used (PEP 562)."""
    if name in ("check", "replay", "Verdict"):
        from cowcheck import checking as module
    elif name in ("walk_test", "make_map_machine", "MachineConfig"):
        from cowcheck import map as module
    elif name in ("make_table_machine", "TableMachineConfig"):
        from cowcheck import table as module
    elif name in ("make_checkpoint_machine", "CheckpointMachineConfig"):
        from cowcheck import checkpoint as module
    elif name in ("make_backend_machine", "BackendMachineConfig"):
        from cowcheck import backend as module
    elif name in ("make_async_machine", "AsyncMachineConfig"):
        from cowcheck import async_exec as module
    elif name == "CheckFailure":
        from cowcheck.core import failures as module
    elif name == "UsageError":
        from cowcheck.core import errors as module
    else:
        raise AttributeError(f"module 'cowcheck' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
