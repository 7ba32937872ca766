"""Key and namespace families a map takes (docs/contract.md §17): probed, chosen, drawn, recorded, replayed.

The maps are tests/zoo/primitive.py's (int and str keys and namespaces only),
run in this process; tests/test_zoo.py runs them as a user does (``cowcheck
check``, the map in a process of its own).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "zoo"))

import primitive  # noqa: E402

import cowcheck  # noqa: E402
from cowcheck.core.errors import UsageError  # noqa: E402
from cowcheck.core.impls import Implementation  # noqa: E402
from cowcheck.core.keys import family_of  # noqa: E402
from cowcheck.core.machine import machine_kind  # noqa: E402
from cowcheck.map.families import probe_families  # noqa: E402
from cowcheck.map.ops import MAP_OPS, PAIR  # noqa: E402
from cowcheck.map.space import SpaceCoverage  # noqa: E402
from cowcheck.map.walks import walk_program  # noqa: E402
from cowcheck.reference.hashing import java_hash_code  # noqa: E402
from cowcheck.reference.keys import VOID_NAMESPACE, TimeWindow, Tuple2  # noqa: E402
from cowcheck.spark_fuzz.executor import CampaignConfig, run_seed  # noqa: E402

PRIMITIVE = "primitive:make_map"


def _families_of(steps) -> tuple[set, set]:
    keys, namespaces = set(), set()
    for step in steps:
        op = MAP_OPS[step.op]
        at = 0
        for domain in op.domains:
            if domain is PAIR:
                keys.add(family_of(step.args[at]).name)
                namespaces.add(family_of(step.args[at + 1]).name)
            at += domain.arity
    return keys, namespaces


def test_the_probe_leaves_out_exactly_the_families_a_primitive_map_refuses():
    impl = Implementation(PRIMITIVE, primitive.make_map, None, user=True)
    found = probe_families(impl, capacity=4, key_families=None, namespace_families=None)
    assert set(found.left_out) == {("key", "tuple"), ("namespace", "void"), ("namespace", "window")}
    assert found.settings == {"key_families": ("int", "long", "string"), "namespace_families": ("int",)}
    assert all("TypeError" in why for why in found.left_out.values())
    # chosen families are not probed: the run hands the map what it was told it takes
    chosen = probe_families(impl, capacity=4, key_families=("tuple",), namespace_families=("void",))
    assert (chosen.left_out, chosen.settings) == ({}, {"key_families": ("tuple",), "namespace_families": ("void",)})


def test_a_map_that_takes_no_family_is_bad_usage():
    impl = Implementation("primitive:no_keys", primitive.no_keys, None, user=True)
    with pytest.raises(UsageError, match="takes no key or namespace family"):
        probe_families(impl, capacity=4, key_families=None, namespace_families=None)


def test_walks_draw_only_the_families_chosen_and_the_same_walks_as_before_when_all_are():
    for seed in range(40):
        steps = list(walk_program(seed, 60, key_families=("int", "string"), namespace_families=("int",)))
        keys, namespaces = _families_of(steps)
        assert keys <= {"int", "string"} and namespaces <= {"int"}, (seed, keys, namespaces)
        every = (("int", "long", "string", "tuple"), ("int", "void", "window"))
        assert list(walk_program(seed, 60, key_families=every[0], namespace_families=every[1])) == \
            list(walk_program(seed, 60))


def test_a_primitive_maps_bug_is_found_and_its_counterexample_records_and_replays_the_families(tmp_path):
    # (tests/test_zoo.py: the correct map passes, with the notice; here the file a bug leaves)
    failed = cowcheck.check(primitive.copies_target_only, seed=1, save_dir=str(tmp_path), replays=1)
    assert (failed.exit_code, failed.failure.kind, failed.failure.code) == (1, "DIVERGENCE", "P2"), failed.output
    assert "does not take key family tuple" in failed.errors
    stored = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert stored["settings"] == {"key_families": ["int", "long", "string"], "namespace_families": ["int"]}
    again = cowcheck.replay(next(tmp_path.glob("*.json")), impl="primitive:copies_target_only")
    assert again.exit_code == 1 and "DIVERGENCE P2" in again.output, again.output + again.errors


def test_a_campaign_seed_draws_the_families_of_its_config():
    config = CampaignConfig(impl=PRIMITIVE, steps=120, sizes="small", key_families=("int", "long", "string"),
                            namespace_families=("int",), in_process=True)
    assert all(run_seed(seed, config).kind == "PASS" for seed in range(6))
    assert CampaignConfig.from_json(json.loads(json.dumps(config.to_json()))) == config
    assert "key_families" not in CampaignConfig().to_json()  # a campaign that chose none: the manifest as before


def test_the_space_names_a_family_left_out_as_the_reason_a_kind_was_never_reached():
    space = SpaceCoverage()
    space.record_size(3, 4, live=0)
    space.leave_out("key", ["tuple"])
    space.finish_map()
    lines = "\n".join(SpaceCoverage.from_json(space.to_json()).lines())
    assert "never reached: keys: Tuple2 (its key family, tuple, was left out of the run" in lines
    assert "never reached: keys: long, beyond int32\n" in lines + "\n"  # not left out: no reason given


def test_the_config_refuses_a_family_of_another_role():
    kind = machine_kind("map")
    with pytest.raises(ValueError, match="key families are"):
        kind.config(key_families=("void",))
    assert kind.config(key_families="string,int").key_families == ("int", "string")


@pytest.mark.parametrize("value", [Tuple2(7, "é"), Tuple2(1 << 40, "日本"), TimeWindow(0, 10),
                                   TimeWindow(-(1 << 62), 1 << 62), VOID_NAMESPACE])
def test_the_key_objects_answer_java_hash_code_themselves(value):
    assert value.hashCode() == java_hash_code(value)
