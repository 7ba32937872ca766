"""The layers of docs/ARCHITECTURE.md, read from the source: imports point down, never around in a circle.

Every ``import`` statement counts, at module level or inside a function (an
import hidden in a function body is still an arrow), and no string spells a
module for later import (``"cowcheck.x:attr"``): what a module uses, it imports. No module
of the suite is longer than ``MOST_LINES`` lines.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reference", "model", "properties", "spark_fuzz")
# The repository's folders and the names they are installed under (pyproject.toml's package-dir).
INSTALLED = {"properties": "cowcheck", "reference": "cowcheck.reference", "model": "cowcheck.model",
             "spark_fuzz": "cowcheck.spark_fuzz"}

# Lower layers first; a module may import its own layer or any below.
LAYERS = [
    ("reference", ("cowcheck.reference",)),
    ("model", ("cowcheck.model",)),
    ("core", ("cowcheck.core",)),
    ("machines", ("cowcheck.map", "cowcheck.async_exec", "cowcheck.checkpoint", "cowcheck.table",
                  "cowcheck.backend", "cowcheck.operator", "cowcheck.registry")),
    ("flink", ("cowcheck.flink",)),
    ("cli", ("cowcheck.cli", "cowcheck.pytest_plugin", "cowcheck.checking", "cowcheck.__main__", "cowcheck")),
    ("spark", ("cowcheck.spark_fuzz",)),
]
# Machine packages are siblings: none imports another (cowcheck.registry gathers them).
SIBLINGS = ("cowcheck.map", "cowcheck.async_exec", "cowcheck.checkpoint", "cowcheck.table",
            "cowcheck.backend", "cowcheck.operator")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([INSTALLED[parts[0]], *parts[1:]])


MODULES = {_module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _owner(module: str, groups) -> str | None:
    """The longest prefix of ``module`` among ``groups`` (module boundaries only)."""
    best = None
    for group in groups:
        if module == group or module.startswith(group + "."):
            if best is None or len(group) > len(best):
                best = group
    return best


def layer_of(module: str) -> int:
    prefixes = [(prefix, i) for i, (_, names) in enumerate(LAYERS) for prefix in names]
    owner = _owner(module, [p for p, _ in prefixes])
    assert owner is not None, f"{module} belongs to no layer of docs/ARCHITECTURE.md"
    return dict(prefixes)[owner]


def imports_of(module: str) -> set[str]:
    """Every module of ours that ``module`` imports, anywhere in its source."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_belongs_to_a_layer():
    assert all(layer_of(m) >= 0 for m in MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    upward = sorted(target for target in GRAPH[module] if layer_of(target) > layer_of(module))
    assert upward == [], f"{module} (layer {LAYERS[layer_of(module)][0]}) imports from above: {upward}"


def test_machine_packages_do_not_import_each_other():
    crossing = sorted((m, t) for m in MODULES for t in GRAPH[m]
                      if _owner(m, SIBLINGS) and _owner(t, SIBLINGS) and _owner(m, SIBLINGS) != _owner(t, SIBLINGS))
    assert crossing == []


def test_no_import_cycles():
    index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_string_names_a_module_attribute_to_import_later():
    spelled = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value.strip()
                head, sep, attr = text.partition(":")
                if sep and head in MODULES and attr.isidentifier():
                    spelled.append((module, text))
    assert spelled == []


def test_the_suite_never_imports_spark():
    assert sorted(m for m in MODULES if not m.startswith("cowcheck.spark_fuzz")
                  and any(t.startswith("cowcheck.spark_fuzz") for t in GRAPH[m])) == []


# A module past this many lines is split along its seams (docs/ARCHITECTURE.md lists each module
# with one line of what it holds); tests/ are not counted.
MOST_LINES = 800


def test_no_module_of_the_suite_exceeds_the_line_limit():
    too_long = {}
    for package in PACKAGES + ("benchmarks",):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MOST_LINES:
                too_long[str(path.relative_to(ROOT))] = lines
    assert too_long == {}
