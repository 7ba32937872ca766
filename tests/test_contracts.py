"""The PEP 316 contracts of cowcheck.reference.layout and cowcheck.reference.hashing, on concrete inputs,
and the map's inlined arithmetic against the layout functions.

CrossHair searches the contracts symbolically (tests/test_prove.py); here
Hypothesis evaluates the same condition lines, parsed by CrossHair's own PEP
316 parser, on concrete inputs. The map inlines ``bucket_index`` and
``uses_primary_table`` on its hot paths: the harness checks, after every
step, that each entry sits where those functions say (invariant I1) and that
every read finds what the model holds (P1), over keys whose hashes span int32.
"""

import os
import subprocess
import sys

import pytest
from crosshair.condition_parser import Pep316Parser
from crosshair.fnutil import FunctionInfo
from hypothesis import assume, given
from hypothesis import strategies as st

from cowcheck.map.harness import Harness
from cowcheck.core.program import Step
from cowcheck.core.contracts import DEFAULT_TARGETS, find_contracts
from cowcheck.reference import CopyOnWriteStateMap
from cowcheck.reference import hashing, layout
from cowcheck.reference.hashing import INT_MAX, INT_MIN, MAX_PARALLELISM_UPPER_BOUND
from cowcheck.reference.layout import MAXIMUM_CAPACITY, VALID_CAPACITIES

INT32 = st.integers(INT_MIN, INT_MAX)
LONG = st.integers(-(2**63), 2**63 - 1)
CAPACITY = st.sampled_from(VALID_CAPACITIES)
GROWABLE = st.sampled_from(VALID_CAPACITIES[:-1])
INT32_EDGES = st.sampled_from([INT_MIN, INT_MIN + 1, -1, 0, 1, INT_MAX - 1, INT_MAX])


def _table_with_index(lengths, index_name="rehash_index", length_name="primary_length", **more):
    """A table length and an index into it (plus ``more`` strategies)."""
    return lengths.flatmap(lambda n: st.fixed_dictionaries(
        {length_name: st.just(n), index_name: st.integers(0, n - 1), **more}))


# Inputs for each contract; preconditions still filter (assume) what is drawn.
INPUTS = {
    "is_valid_capacity": st.fixed_dictionaries({"capacity": st.one_of(CAPACITY, st.integers(-8, 2**31))}),
    "bucket_index": st.fixed_dictionaries({"h": st.one_of(INT32, INT32_EDGES), "length": CAPACITY}),
    "uses_primary_table": _table_with_index(CAPACITY, h=st.one_of(INT32, INT32_EDGES)),
    "threshold_for": st.fixed_dictionaries({"capacity": CAPACITY}),
    "doubled_capacity": st.fixed_dictionaries({"capacity": CAPACITY}),
    "split_targets": _table_with_index(GROWABLE, "old_index", "old_length"),
    "new_bucket": st.fixed_dictionaries({"h": st.one_of(INT32, INT32_EDGES), "old_length": GROWABLE}),
    "snapshot_array_length": _table_with_index(CAPACITY, size=st.integers(0, INT_MAX)),
    "snapshot_regions": _table_with_index(st.sampled_from([4, 8, 16]), rehashing=st.booleans()),
    "to_int32": st.fixed_dictionaries({"value": st.one_of(LONG, st.integers(), INT32_EDGES)}),
    "java_string_hash": st.fixed_dictionaries({"s": st.text(max_size=12)}),
    "bit_mix": st.fixed_dictionaries({"h": st.one_of(INT32, st.integers(0, 2**32 - 1), INT32_EDGES)}),
    "murmur_hash": st.fixed_dictionaries({"code": st.one_of(INT32, INT32_EDGES)}),
    "key_group_for_hash": st.fixed_dictionaries(
        {"key_hash": INT32, "max_parallelism": st.integers(1, MAX_PARALLELISM_UPPER_BOUND)}),
    "key_group": st.fixed_dictionaries({"key": st.one_of(LONG, st.text(max_size=4)),
                                        "max_parallelism": st.integers(1, MAX_PARALLELISM_UPPER_BOUND)}),
}

CONTRACTS = [c for target in DEFAULT_TARGETS for c in find_contracts(target)]
MODULES = {"cowcheck.reference.layout": layout, "cowcheck.reference.hashing": hashing}


def broken_postconditions(fn, arguments: dict) -> list[str] | None:
    """The post lines ``fn`` breaks on ``arguments``; None if a precondition rejects them."""
    conditions = Pep316Parser().get_fn_conditions(FunctionInfo.from_fn(fn))
    if not all(pre.evaluate(dict(arguments)) for pre in conditions.pre):
        return None
    result = fn(**arguments)
    bindings = dict(arguments, __return__=result, __old__=None)
    return [f"line {post.line}: {post.expr_source}" for post in conditions.post if not post.evaluate(bindings)]


def test_every_contract_has_an_input_strategy():
    assert sorted(c.function for c in CONTRACTS) == sorted(INPUTS)


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.function)
@given(data=st.data())
def test_contract_holds_on_hypothesis_inputs(contract, data):
    fn = getattr(MODULES[contract.module], contract.function)
    arguments = data.draw(INPUTS[contract.function])
    broken = broken_postconditions(fn, arguments)
    assume(broken is not None)
    assert [] == broken


def test_contracts_hold_at_the_edges_of_the_table_sizes():
    cases = [
        (layout.threshold_for, {"capacity": MAXIMUM_CAPACITY}),
        (layout.doubled_capacity, {"capacity": MAXIMUM_CAPACITY}),
        (layout.new_bucket, {"h": INT_MIN, "old_length": MAXIMUM_CAPACITY // 2}),
        (layout.snapshot_array_length, {"primary_length": 4, "rehash_index": 3, "size": INT_MAX}),
        (layout.uses_primary_table, {"h": INT_MAX, "primary_length": MAXIMUM_CAPACITY,
                                     "rehash_index": MAXIMUM_CAPACITY - 1}),
    ]
    assert [[] for _ in cases] == [broken_postconditions(fn, args) for fn, args in cases]


def test_a_broken_postcondition_is_reported_with_its_line():
    import crosshair_mutants

    broken = broken_postconditions(crosshair_mutants.uses_primary_table__strict,
                                   {"h": 0, "primary_length": 4, "rehash_index": 0})
    assert 2 == len(broken)
    assert broken[0].endswith("__return__ == (h % primary_length >= rehash_index)  # buckets below rehash_index "
                              "have moved")


# The map's inlined hot paths against the layout functions.

KEYS = st.one_of(INT32, INT32_EDGES, LONG, st.text(max_size=3))
NAMESPACES = st.sampled_from([0, 1, -1, INT_MIN, INT_MAX, "w"])
KEYED_OPS = ["put", "put_and_get_old", "transform", "get", "contains_key", "remove", "remove_and_get_old"]


@st.composite
def wide_key_programs(draw):
    """Steps over a small pool of keys whose hashes spread over int32; chains
    (key == namespace), rehash steps and snapshots included."""
    pool = draw(st.lists(st.tuples(KEYS, NAMESPACES), min_size=1, max_size=24, unique=True))
    pool += [(k, k) for k, _ in pool if isinstance(k, int) and INT_MIN <= k <= INT_MAX][:4]
    steps, live, sid = [], [], 0
    for _ in range(draw(st.integers(1, 120))):
        kind = draw(st.sampled_from(KEYED_OPS * 3 + ["rehash", "snapshot", "release"]))
        if kind == "rehash":
            steps.append(Step("rehash", (-1, -1, draw(st.integers(1, 4)))))
        elif kind == "snapshot":
            steps.append(Step("snapshot", (sid,)))
            live.append(sid)
            sid += 1
        elif kind == "release":
            if live:
                steps.append(Step("release", (live.pop(draw(st.integers(0, len(live) - 1))),)))
        else:
            key, namespace = draw(st.sampled_from(pool))
            if kind in ("put", "put_and_get_old"):
                steps.append(Step(kind, (key, namespace, [draw(st.integers(0, 9))])))
            elif kind == "transform":
                steps.append(Step(kind, (key, namespace, draw(st.integers(0, 9)))))
            else:
                steps.append(Step(kind, (key, namespace)))
    return steps


@given(steps=wide_key_programs())
def test_every_entry_the_map_places_sits_where_the_layout_functions_say(steps):
    # White-box harness: I1 (bucket_index, uses_primary_table) after each step, P1 for every read.
    harness = Harness(CopyOnWriteStateMap(capacity=4), white_box=True)
    for step in steps:
        harness.apply(step)


def test_a_map_grown_through_several_rehashes_keeps_every_entry_where_the_layout_says():
    harness = Harness(CopyOnWriteStateMap(capacity=4), white_box=True)
    keys = [INT_MIN, INT_MAX, -1, 2**40, -(2**63), "ß", "\U0001F600"] + list(range(-300, 300, 7))
    for i, key in enumerate(keys):
        harness.apply(Step("put", (key, i % 3, [i])))
        if i % 10 == 0:
            harness.apply(Step("snapshot", (i // 10,)))
    for i, key in enumerate(keys):
        harness.apply(Step("get", (key, i % 3)))
    assert len(harness.impl.primary_table) >= 64


_KEY_GROUP_SCRIPT = """
from cowcheck.reference.hashing import key_group
print([key_group(k, 128) for k in ["abc", "user-1", "\\u00df", "", "\\U0001F600", 42, -7, 2**40]])
"""


def test_key_groups_are_the_same_in_processes_with_different_string_hash_seeds():
    outputs = set()
    for seed in ("0", "1", "12345"):
        run = subprocess.run([sys.executable, "-c", _KEY_GROUP_SCRIPT], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONHASHSEED=seed), check=True, timeout=60)
        outputs.add(run.stdout)
    assert 1 == len(outputs)
    assert outputs.pop().startswith("[115, ")
