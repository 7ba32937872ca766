"""The wheel ships what users need: the Flink bridge's Java sources (``--impl flink``
compiles them on first use), the contract ``cowcheck explain`` reads, the command
entry points and the Spark log config.

The full round trip (a fresh virtual environment with the ``flink`` extra,
``cowcheck check --impl flink`` outside the checkout) is a step of ``.ci/run``.
"""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_the_bridge_sources_the_contract_and_the_entry_points(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, text=True)
    (wheel,) = tmp_path.glob("cowcheck-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    java = {Path(n).name for n in names if n.startswith("cowcheck/flink/java/") and n.endswith(".java")}
    wanted = {p.name for p in (ROOT / "properties" / "flink" / "java").rglob("*.java")}
    assert wanted and wanted == java
    assert "cowcheck/spark_fuzz/log4j2.properties" in names
    assert "cowcheck/py.typed" in names
    assert zipfile.ZipFile(wheel).read("cowcheck/core/contract.md") == (ROOT / "docs/contract.md").read_bytes()
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "cowcheck = cowcheck.cli:main" in text
    assert "campaign = cowcheck.spark_fuzz.command" in text
    assert not [n for n in names if n.startswith("tests/")]
    # One name in site-packages: nothing a user's own project (a model.py, a properties folder) could clash with.
    assert {n.split("/")[0] for n in names} == {"cowcheck", wheel.name.split("-py3")[0] + ".dist-info"}


def test_every_package_folder_is_installed_under_cowcheck():
    """pyproject.toml lists the packages by hand (package-dir maps the folders under ``cowcheck``):
    a new folder with an ``__init__.py`` that is not listed would be missing from the wheel."""
    import tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {v: k for k, v in config["package-dir"].items()}
    found = set()
    for folder, name in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *relative)))
    assert sorted(found) == sorted(config["packages"])
