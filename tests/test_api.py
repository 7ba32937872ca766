"""The API protocols: what the reference and the model offer, and what the contract names."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowcheck.model import ModelMap
from cowcheck.core import api
from cowcheck.core.impls import resolve
from cowcheck.reference import CopyOnWriteStateMap

ROOT = Path(__file__).resolve().parent.parent


def _members(protocol) -> list[str]:
    declared = set(vars(protocol)) | set(getattr(protocol, "__annotations__", {}))
    return sorted(name for name in declared if not name.startswith("_"))


@pytest.mark.parametrize("make", [lambda: CopyOnWriteStateMap(capacity=4), ModelMap,
                                  lambda: resolve("mutant:skip-prefix-copy").new(capacity=4)],
                         ids=["reference", "model", "mutant"])
def test_the_reference_the_model_and_a_mutant_speak_the_map_api(make):
    m = make()
    m.put(1, 0, [1])
    s = m.snapshot()
    assert isinstance(m, api.StateMap) and isinstance(s, api.StateMapSnapshot)
    assert isinstance(s.iterate(None), api.SnapshotView)


def test_the_reference_offers_the_optional_calls():
    m = CopyOnWriteStateMap(capacity=4)
    assert isinstance(m, api.HasIncrementalVisitor) and isinstance(m.incremental_visitor(1), api.IncrementalVisitor)
    assert isinstance(m.snapshot(), api.WritesState)


def test_a_map_without_one_call_is_not_a_state_map():
    class NoKeys(CopyOnWriteStateMap):
        keys = None

    assert not isinstance(NoKeys(capacity=4), api.StateMap)


def test_the_contract_names_every_call_of_the_protocols():
    text = (ROOT / "docs/contract.md").read_text(encoding="utf-8")
    calls = text.split("\n## 15. ", 1)[1].split("\n## ", 1)[0]
    named = {name: f"m.{name}(" in calls or f"s.{name}" in calls or f"`{name}(" in calls
             for protocol in (api.StateMap, api.StateMapSnapshot, api.WritesState, api.IncrementalVisitor,
                              api.HasIncrementalVisitor)
             for name in _members(protocol)}
    assert [name for name, found in named.items() if not found] == []
