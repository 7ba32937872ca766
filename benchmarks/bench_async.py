"""Throughput of records through the AsyncExecutionController against calling the backend directly.

Run from the repository root::

    python -m benchmarks.bench_async [--records N] [--keys K] [--repeat R] [--seed S]

What is measured (all in one run, interleaved so machine noise hits every
variant alike): records/s of a read-modify-write record (read ``count``, add
one, write it back) over ``K`` int keys drawn at random, so records of one key
meet in flight and block each other:

- ``direct``: ``get`` then ``put`` on a ``CopyOnWriteStateMap``, the backend
  the controller uses (no futures, no buffering);
- ``controller, batch B`` for B in 1, 10, 100: ``process_record`` of the same
  records through an ``AsyncExecutionController`` (synchronous executor,
  default in-flight limit 6000, no buffer timeout) whose record function is
  ``count.async_value().then_apply(+1).then_compose(count.async_update)``.
  Before each record the task thread runs its mailbox (as Flink's mailbox
  loop runs mails between records); the pass ends with a drain to 0.

Each repeat builds fresh structures (untimed), runs the variants back to back
in an order that rotates per repeat, with the garbage collector off inside
timed passes. Times are CPU time of this process (``time.process_time``). The
table shows the best records/s over the repeats, the ratio direct/variant of
those bests, and the median over repeats of the per-repeat ratio. Every pass
is checked to leave the same final state as the direct one.

In Python the executor does no I/O, so a batch amortises nothing: the numbers
show the controller's bookkeeping cost (contexts, reference counts, futures,
mails), which grows with the records in flight that larger batches allow.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
from time import process_time as clock

from cowcheck.reference import CopyOnWriteStateMap
from cowcheck.reference.async_execution import AsyncExecutionController
from cowcheck.reference.state_executor import VOID_NAMESPACE

BATCH_SIZES = (1, 10, 100)
VARIANTS = ("direct",) + tuple(f"batch {b}" for b in BATCH_SIZES)


def _direct(keys) -> tuple[float, dict]:
    store = CopyOnWriteStateMap()
    get, put = store.get, store.put
    t0 = clock()
    for key in keys:
        value = get(key, VOID_NAMESPACE)
        put(key, VOID_NAMESPACE, (value or 0) + 1)
    seconds = clock() - t0
    return seconds, {key: value for key, _, value in store}


def _through_controller(keys, batch_size: int) -> tuple[float, dict]:
    aec = AsyncExecutionController(batch_size=batch_size, buffer_timeout=0)
    count = aec.value_state("count")

    def increment():
        count.async_value().then_apply(lambda v: (v or 0) + 1).then_compose(count.async_update)

    run_mailbox, process_record = aec.run_mailbox, aec.process_record
    t0 = clock()
    for record, key in enumerate(keys):
        run_mailbox()
        process_record(record, key, increment)
    aec.drain_inflight_records(0)
    seconds = clock() - t0
    return seconds, {key: value for _, key, _, value in aec.backend.items()}


def one_repeat(keys, rotation: int) -> dict:
    """Every variant once, in a rotated order; seconds per variant."""
    order = VARIANTS[rotation % len(VARIANTS):] + VARIANTS[: rotation % len(VARIANTS)]
    seconds, states = {}, {}
    for variant in order:
        gc.collect()
        gc.disable()
        try:
            if variant == "direct":
                seconds[variant], states[variant] = _direct(keys)
            else:
                seconds[variant], states[variant] = _through_controller(keys, int(variant.split()[1]))
        finally:
            gc.enable()
    wrong = [v for v in VARIANTS if states[v] != states["direct"]]
    if wrong:
        raise AssertionError(f"final state of {wrong} differs from the direct pass")
    return seconds


def _rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k"


def report(n_records: int, n_keys: int, repeats: list[dict]) -> str:
    lines = [
        f"Python {platform.python_version()} ({platform.python_implementation()}), {sys.platform}; "
        f"{n_records} read-modify-write records over {n_keys} int keys, {len(repeats)} interleaved repeats, "
        f"CPU time",
        "Measured: records/s calling a CopyOnWriteStateMap directly vs through AsyncExecutionController "
        "(sync executor, same map backend, in-flight limit 6000, mailbox run before each record, drain at end).",
        "Columns: best records/s over repeats; ratio = direct/variant of those bests; "
        "median = median over repeats of the per-repeat direct/variant ratio.",
        "",
    ]
    header = f"{'variant':<22} {'records/s':>10} {'ratio':>7} {'median':>7}"
    lines += [header, "-" * len(header)]
    best_direct = max(n_records / r["direct"] for r in repeats)
    for variant in VARIANTS:
        best = max(n_records / r[variant] for r in repeats)
        median = statistics.median(r[variant] / r["direct"] for r in repeats)
        label = "direct (map get/put)" if variant == "direct" else f"controller, {variant}"
        lines.append(f"{label:<22} {_rate(best):>10} {best_direct / best:>6.1f}x {median:>6.1f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records per timed pass (default 20000)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10000)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repeats (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    args = parser.parse_args(argv)
    if args.records <= 0 or args.keys <= 0 or args.repeat <= 0:
        parser.error("--records, --keys and --repeat must be positive")
    rnd = random.Random(args.seed)
    keys = [rnd.randrange(args.keys) for _ in range(args.records)]
    repeats = [one_repeat(keys, i) for i in range(args.repeat)]
    print(report(args.records, args.keys, repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
