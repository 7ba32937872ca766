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
    java = {Path(n).name for n in names if n.startswith("properties/flink/java/") and n.endswith(".java")}
    wanted = {p.name for p in (ROOT / "properties" / "flink" / "java").rglob("*.java")}
    assert wanted and wanted == java
    assert "spark_fuzz/log4j2.properties" in names
    assert zipfile.ZipFile(wheel).read("properties/core/contract.md") == (ROOT / "docs/contract.md").read_bytes()
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "cowcheck = properties.cli:main" in text
    assert "campaign = spark_fuzz.command" in text
    assert not [n for n in names if n.startswith("tests/")]
