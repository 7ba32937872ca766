"""The documentation site builds from docs/ and the docstrings with warnings as errors: a page outside
every table of contents, a link to a missing page or anchor, a docstring that is not valid
reStructuredText fails the build (and this test). The command is the README's."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_documentation_site_builds_without_a_warning(tmp_path):
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(ROOT / "docs"), str(tmp_path / "html")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "html" / "contract.html").is_file() and (tmp_path / "html" / "api.html").is_file()
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf-8")
    assert "cowcheck.checking.check" in api and "CopyOnWriteStateMap" in api
