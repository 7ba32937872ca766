"""Child Python processes that do not put the working directory on ``sys.path``.

``python -m MODULE`` puts the current directory first on ``sys.path``, so a
file such as ``attrs.py`` lying beside the counterexamples a user replays
would be imported, and run, in the child instead of the real package.
:func:`module_command` runs a module the way ``-m`` does, minus that entry
(what ``-P`` does from Python 3.11 on); entries the user put on the path
(``PYTHONPATH``) stay.

>>> module_command("pip", "--version")[3:]
['pip', '--version']
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["module_command", "SAFE_PATH_ENV", "describe_wait_status"]

# With -c, sys.path[0] is the working directory ('') unless PYTHONSAFEPATH (3.11+) left it out.
_RUN_MODULE = ('import sys, runpy\n'
               'if not getattr(sys.flags, "safe_path", False): del sys.path[0]\n'
               'name = sys.argv.pop(1); runpy.run_module(name, run_name="__main__", alter_sys=True)')

# For processes others start (Spark's Python workers, ``python -m pyspark.daemon``): from
# Python 3.11 on, this variable keeps the working directory off their sys.path.
SAFE_PATH_ENV = {"PYTHONSAFEPATH": "1"}


def module_command(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """The command running ``python -m module args...`` without the working directory on ``sys.path``."""
    return [python, "-c", _RUN_MODULE, module, *args]


def describe_wait_status(status: int) -> str:
    """A child's ``os.waitpid`` status in words: ``killed by signal SIGKILL``, ``exit code 3``."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"
