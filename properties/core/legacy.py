"""The module names cowcheck had before 0.2.0, for what was written with them.

Up to 0.1.0 the wheel installed four top-level packages, "properties",
"reference", "model" and "spark_fuzz"; from 0.2.0 everything lives under
``cowcheck`` ("properties.map" is ``cowcheck.map``, "reference.keys" is
``cowcheck.reference.keys``). What users wrote with the old names keeps working:

- **counterexample files** are data: an implementation spec that names a module
  by its old name ("reference.cow_state_map:CopyOnWriteStateMap") is rewritten
  on read (:func:`renamed_spec`);
- **regression tests** written by ``cowcheck replay --to-pytest`` import the old
  names: under pytest (the cowcheck plugin installs :func:`install`) an import of
  an old name that nothing else provides resolves to the module under
  ``cowcheck``, the same module object, with a DeprecationWarning naming the new
  import. A user's own "model" or "properties" always wins: the alias is
  used only when no other finder provides the name.

>>> new_name("properties.core.impls"), new_name("reference"), new_name("model.keyed_model")
('cowcheck.core.impls', 'cowcheck.reference', 'cowcheck.model.keyed_model')
>>> new_name("properties.no_such_module") is None, new_name("numpy") is None
(True, True)
>>> renamed_spec("reference.cow_state_map:CopyOnWriteStateMap")
'cowcheck.reference.cow_state_map:CopyOnWriteStateMap'
>>> renamed_spec("mypkg.maps:make_map"), renamed_spec("flink@1.13.6")
('mypkg.maps:make_map', 'flink@1.13.6')
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

__all__ = ["OLD_NAMES", "new_name", "renamed_spec", "install"]

OLD_NAMES = {"properties": "cowcheck", "reference": "cowcheck.reference", "model": "cowcheck.model",
             "spark_fuzz": "cowcheck.spark_fuzz"}


def new_name(old: str) -> str | None:
    """The module under ``cowcheck`` that the pre-0.2.0 name ``old`` meant, if it exists; else None."""
    top, dot, rest = old.partition(".")
    if top not in OLD_NAMES:
        return None
    name = OLD_NAMES[top] + (dot + rest if rest else "")
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return name if found is not None else None


def renamed_spec(spec: str) -> str:
    """An implementation spec with its module's old name replaced (``MODULE:FACTORY`` only)."""
    module, sep, attribute = spec.partition(":")
    if not sep or "@" in module:
        return spec
    renamed = new_name(module)
    return f"{renamed}:{attribute}" if renamed else spec


class _Alias(importlib.abc.Loader):
    """Hands out the module under its new name: one module object, whichever name imported it."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        pass  # imported (and run) once, under its new name


class _OldNames(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` so that a submodule of an aliased package is aliased too (its parent's
    ``__path__`` is the real folder, where the path finder would load a second copy); a top-level old
    name is aliased only when no other finder provides it (a user's own ``model`` wins)."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top not in OLD_NAMES:
            return None
        if top == fullname:
            if any(finder is not self and hasattr(finder, "find_spec") and finder.find_spec(fullname, None)
                   for finder in sys.meta_path):
                return None
        elif sys.modules.get(top) is None or sys.modules.get(top) is not sys.modules.get(OLD_NAMES[top]):
            return None  # the user's own package of that name
        target_name = new_name(fullname)
        if target_name is None:
            return None
        warnings.warn(f"{fullname} is {target_name} since cowcheck 0.2.0: import {target_name} instead "
                      f"(the old name will be removed)", DeprecationWarning, stacklevel=2)
        real = importlib.util.find_spec(target_name)
        return importlib.machinery.ModuleSpec(fullname, _Alias(target_name), is_package=real.submodule_search_locations
                                              is not None)


_FINDER = _OldNames()


def install() -> None:
    """Resolve the old names where nothing else does (once per process)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
