"""Time limits on the implementation's calls (cowcheck.core.limits)."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_wait_for_several_calls_signalled_past_the_full_limit_gets_the_grace_a_single_call_gets():
    # A step run ahead in the map's process is waited for as long as several calls may take:
    # past the full limit, and past the limit plus the grace given to a main thread that is slow
    # to pick up StepTimeout (a loaded machine, a call in C). Such a wait is a StepTimeout the
    # harness turns into a verdict, not a main thread stuck in native code (the process ending).
    script = textwrap.dedent("""
        import signal
        import time
        from cowcheck.core.limits import StepTimeLimit, StepTimeout, implementation_calls

        def wait():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(4.5)  # the limit of 20 calls (4 s) runs out; the signal waits half a second
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
            time.sleep(60)

        with StepTimeLimit(0.2):
            try:
                implementation_calls(20, wait)
            except StepTimeout as exc:
                print("StepTimeout", exc.seconds)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (run.returncode, run.stdout.split()) == (0, ["StepTimeout", "4.0"]), run.stdout + run.stderr
