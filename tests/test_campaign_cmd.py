"""``cowcheck campaign`` usage errors: one line, exit 2, before Spark starts.
(Campaigns through the command line run in tests/test_campaign_spark.py.)"""

import io

import pytest

from cowcheck.cli import main


@pytest.mark.parametrize("args, problem", [
    (["--seeds", "5:2"], "expected A:B with 0 <= A < B"),
    (["--seeds", "x"], "expected A:B with 0 <= A < B"),
    (["--seeds", "0:9", "--minutes", "3"], "not allowed with argument"),
    (["--impl", "nope"], "unknown implementation 'nope'"),
    (["--executor", "hypothesis", "--invariants-every", "4"], "--invariants-every applies to --executor raw"),
    (["--capacity", "6"], "capacity must be a power of two"),
])
def test_bad_usage_is_one_line_and_exit_code_2_without_starting_spark(args, problem):
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["campaign", *args], stdout, stderr) == 2
    assert problem in stderr.getvalue()
    assert stderr.getvalue().count("\n") == 1 and stdout.getvalue() == ""

