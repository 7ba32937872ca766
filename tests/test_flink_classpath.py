"""``--classpath``: a class compiled by the user, put before Flink's jar, replaces Flink's own.

The class is cowcheck's own (KeyGroupRangeAssignment.java under tests/zoo/flink_override/, written
here: Flink's public methods, with a key's group taken from its hashCode without the murmur hash),
compiled in the test with javac against the installed release's jar. The table machine finds the
change (T2: a checkpoint writes keys into other key groups than the contract's), and the same run
without the jar passes.
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cowcheck.flink.jvm import flink_jars

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "zoo" / "flink_override" / "org" / "apache" / "flink" / "runtime" / "state" / \
    "KeyGroupRangeAssignment.java"
REPLACED = "org.apache.flink.runtime.state.KeyGroupRangeAssignment"


def _patch_jar(tmp_path: Path) -> Path:
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "--release", "11", "-d", str(classes), "-cp", flink_jars()[0][0], str(SOURCE)],
                   check=True, capture_output=True, text=True)
    jar = tmp_path / "patch.jar"
    with zipfile.ZipFile(jar, "w") as z:
        for path in classes.rglob("*.class"):
            z.write(path, path.relative_to(classes).as_posix())
    return jar


def _check(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, list]:
    found = tmp_path / f"found{len(extra)}"
    run = subprocess.run([sys.executable, "-m", "cowcheck.cli", "check", "--machine", "table", "--impl", "flink",
                          "--walks", "5", "--examples", "5", "--seed", "1", "--save-dir", str(found), *extra],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    stored = [json.loads(p.read_text()) for p in found.glob("*.json")]
    return run, stored


@pytest.mark.slow
def test_a_replaced_class_is_named_and_its_change_found_and_the_run_without_it_passes(tmp_path):
    jar = _patch_jar(tmp_path)
    patched, stored = _check(tmp_path, "--classpath", str(jar))
    assert patched.returncode == 1, patched.stdout[-2000:] + patched.stderr[-2000:]
    header = patched.stdout.splitlines()[0]
    assert f"first on the class path: {jar}, replacing 1 of Flink's classes: {REPLACED}" in header
    assert [(cx["failure"]["kind"], cx["failure"]["code"], cx["implementation"]["spec"]) for cx in stored] == [
        ("DIVERGENCE", "T2", f"flink:classpath={jar}")]
    plain, stored = _check(tmp_path)
    assert (plain.returncode, stored) == (0, []), plain.stdout[-2000:] + plain.stderr[-2000:]
