"""The Java helper's operation codes come from the map's table (cowcheck.flink.opcodes): Ops.java
is generated when the helper is compiled, and Walk.java, the one interpreter, has a case for every
operation. No JVM here: tests/test_flink_bridge.py runs what was compiled."""

import re

import attrs

from cowcheck.core.program import OperationTable
from cowcheck.flink.jvm import JAVA_SOURCES, helper_sources
from cowcheck.flink.opcodes import OPS_JAVA, arguments, constant, ops_java
from cowcheck.map.ops import MAP_OPS

BRIDGE = JAVA_SOURCES / "cowcheck" / "bridge"


def test_ops_java_is_generated_from_the_table_and_part_of_what_the_helper_compiles():
    assert not (JAVA_SOURCES / OPS_JAVA).exists()
    assert (OPS_JAVA, ops_java()) in helper_sources()  # so the compiled helper's cache key covers it
    source = ops_java()
    for code, op in enumerate(MAP_OPS):
        assert f"static final int {constant(op.name)} = {code};" in source
    names = re.search(r"OPERATIONS = \{(.*?)\};", source).group(1)
    layouts = re.search(r"ARGUMENTS = \{(.*?)\};", source).group(1)
    assert re.findall(r'"(\w+)"', names) == list(MAP_OPS.names)
    assert re.findall(r'"(\w*)"', layouts) == [arguments(op) for op in MAP_OPS]


def test_a_new_operation_of_the_table_gets_its_code_and_a_new_helper_build():
    table = OperationTable("map", list(MAP_OPS) + [attrs.evolve(MAP_OPS["get"], name="get_again")])
    source = ops_java(table)
    assert source != ops_java() and f"static final int GET_AGAIN = {len(MAP_OPS)};" in source
    assert '"get_again"};' in source and '"kk"};' in source  # its name and argument layout, last


def test_every_operation_of_the_table_has_its_case_in_the_one_java_interpreter():
    """Walk.java applies every operation (a missing case is an error at run time, not at compile
    time: this is the check); no other class of the helper reads operation codes."""
    walk = (BRIDGE / "Walk.java").read_text()
    execute = walk[walk.index("private void execute(int op)"):]
    cases = set(re.findall(r"case ([A-Z_]+):", execute[:execute.index("default:")]))
    assert cases == {constant(name) for name in MAP_OPS.names}
    for source in BRIDGE.glob("*.java"):
        if source.name != "Walk.java":
            assert "Ops." not in source.read_text(), source.name
