"""The oracle: a minimal executable model of snapshot semantics (docs/contract.md §9)."""

from cowcheck.model.snapshot_model import ModelConcurrentModification, ModelMap, ModelReleaseError, ModelSnapshot

__all__ = ["ModelMap", "ModelSnapshot", "ModelReleaseError", "ModelConcurrentModification"]
