"""Flink's own DefaultOperatorStateBackend under the operator machine (properties/flink/operator.py, JVMs).

Each test runs its release in a process of its own (one JVM per process, one release per JVM): parity
of the reference and Flink 2.3.0 on seeded walks, checkpoints the reference writes restored by
Flink 2.3.0 at 1 to 10 instances, and the operator findings replayed on 1.13.6 (``cowcheck versions``).
"""

import json
import subprocess
from pathlib import Path

import pytest

from cowcheck.core.processes import module_command
from cowcheck.flink import available
from cowcheck.flink.operator_releases import write
from cowcheck.flink.versions import NOT_APPLICABLE, REPRODUCES, run_release, spec_of

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings"

pytestmark = pytest.mark.slow


def _json(*args: str) -> dict:
    run = subprocess.run(module_command(*args), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads([line for line in run.stdout.splitlines() if line.startswith("{")][-1])


def test_the_reference_and_flink_2_3_0_agree_on_every_answer_of_seeded_operator_programs():
    assert available() is None
    result = _json("cowcheck.flink.operator_parity", "--one", "2.3.0", "--programs", "12", "--steps", "120")
    assert (result["differences"], result["same"]) == ([], 12) and result["answers"] > 500


def test_flink_2_3_0_restores_what_the_reference_wrote_compressed_and_not_at_1_to_10_instances(tmp_path):
    written = write("reference", 12, 60, tmp_path)
    assert written["checkpoints"] >= 20 and 0 < written["compressed"] < written["checkpoints"]
    result = _json("cowcheck.flink.operator_releases", "--read", "2.3.0", str(tmp_path))
    assert (result["different"], result["explained"], result["same"]) == ([], {}, result["checkpoints"])
    assert len(result["parallelisms"]) >= 8


def test_on_1_13_6_the_null_string_finding_reproduces_and_a_compressed_program_does_not_apply():
    # 1.13.6's classes have no operator-state compression: decided from them, as --machine operator does.
    compressed, null = (str(FINDINGS / f"operator-{n}.json") for n in ("compressed-restore-1.18", "null-string-restore"))
    row = run_release(spec_of("1.13.6"), [compressed, null])
    assert (row[compressed]["outcome"], row[null]["outcome"]) == (NOT_APPLICABLE, REPRODUCES), row
