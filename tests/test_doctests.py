"""Every docstring example in the installed packages runs, and says what it shows.

A docstring's ``>>>`` lines are documentation a reader trusts: each module's
examples run here (``doctest``, the module's own globals), so an example that
goes stale fails the suite like any other test.
"""

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("cowcheck", "cowcheck.reference", "cowcheck.model", "cowcheck.spark_fuzz")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            if info.name.endswith("__main__"):
                continue
            names.append(info.name)
    return sorted(names)


MODULES = _modules()


def test_the_packages_have_doctests_to_run():
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in MODULES for test in finder.find(importlib.import_module(name)))
    assert examples >= 50, examples


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_of_each_module_hold(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (output above)"
