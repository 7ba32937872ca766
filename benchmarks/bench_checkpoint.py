"""Write + restore round trip of a large heap checkpoint, and the memory of its asynchronous part.

Run from the repository root::

    python -m benchmarks.bench_checkpoint [--entries N] [--key-groups G] [--namespaces K]

The workload: ``N`` entries (int key, int namespace, a list of two ints as
state) in one state of a backend owning all ``G`` key groups (max_parallelism
``G``, Flink's map capacity 128). Measured, one run each:

- ``checkpoint``: the synchronous part (one snapshot per key-group map) and
  the asynchronous part writing every key group to a file in a temporary
  directory (the default 20 KB threshold, so it spills): seconds and MB/s;
- ``restore``: reading the file back into a fresh backend, every byte
  checked (checksums, key groups, serializers): seconds and MB/s; the restored
  state is then compared with the original, one key group at a time;
- memory: the live data (growth of the resident set while populating;
  tracing a million puts with ``tracemalloc`` would take minutes), and by
  ``tracemalloc`` what the synchronous part allocates (bucket-head arrays:
  O(map capacity)) and the peak the asynchronous write allocates beyond what
  existed when it started, next to the largest key group's bytes and the
  whole checkpoint's.
  A writer that holds one key group at a time peaks at a small multiple of
  the largest key group, whatever the checkpoint's size.

Timed phases run with the garbage collector off (as ``timeit`` does) and
without ``tracemalloc``; the memory numbers come from separate, untimed runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import tracemalloc
from time import perf_counter

from cowcheck.reference.checkpoint import CheckpointStreamFactory, HeapKeyedStateBackend
from cowcheck.reference.serializers import IntSerializer, ListSerializer
from cowcheck.reference.state_table import KeyGroupRange

MB = 1024 * 1024


def build(entries: int, key_groups: int, namespaces: int, directory: str) -> HeapKeyedStateBackend:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, key_groups - 1), key_groups,
                                    stream_factory=CheckpointStreamFactory(directory))
    table = backend.register_state("events", IntSerializer(), ListSerializer(IntSerializer()))
    put = table.put
    for i in range(entries):
        key, namespace = divmod(i, namespaces)
        put(key, namespace, [key & 0xFFFF, namespace])
    return backend


def timed(fn):
    gc.disable()
    try:
        started = perf_counter()
        result = fn()
        return result, perf_counter() - started
    finally:
        gc.enable()


def _resident_bytes() -> int:
    """Current resident set size (Linux /proc), else the peak from getrusage."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def same_state(original: HeapKeyedStateBackend, restored: HeapKeyedStateBackend) -> bool:
    """Compare key group by key group, so the check itself stays O(one key group)."""
    left, right = original.state("events"), restored.state("events")
    for group in original.key_group_range:
        a = {(k, n): s for k, n, s in left.map_for_key_group(group)}
        b = {(k, n): s for k, n, s in right.map_for_key_group(group)}
        if a != b:
            return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_checkpoint", description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries to checkpoint (default 1,000,000)")
    parser.add_argument("--key-groups", type=int, default=128, help="key groups = max_parallelism (default 128)")
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces per key (default 4)")
    args = parser.parse_args(argv)
    if args.entries < 1 or not 1 <= args.key_groups <= 1 << 15 or args.namespaces < 1:
        parser.error("--entries and --namespaces must be >= 1, --key-groups in [1, 32768]")

    print(f"checkpoint round trip: {args.entries:,} entries (int key, int namespace, list<int> of 2), "
          f"{args.key_groups} key groups, {args.namespaces} namespaces per key")
    print(f"{platform.python_implementation()} {platform.python_version()} on {platform.platform()}")
    with tempfile.TemporaryDirectory(prefix="cowcheck-bench-") as directory:
        rss_before = _resident_bytes()
        backend, populate_seconds = timed(lambda: build(args.entries, args.key_groups, args.namespaces, directory))
        live_bytes = _resident_bytes() - rss_before

        pending, sync_seconds = timed(lambda: backend.checkpoint(1))
        handle, async_seconds = timed(pending.complete)
        size = handle.size
        restored, restore_seconds = timed(lambda: HeapKeyedStateBackend.restore([handle]))
        equal = len(restored.state("events")) == args.entries and same_state(backend, restored)
        del restored
        gc.collect()

        # Memory, untimed: the synchronous part, then the asynchronous write on its own.
        tracemalloc.start()
        pending = backend.checkpoint(2)
        sync_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        tracemalloc.start()
        second = pending.complete()
        async_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        offsets = [offset for _, offset in second.offsets]
        blocks = [b - a for a, b in zip(offsets, offsets[1:])]
        largest_group = max(blocks) if blocks else size
        storage = f"file {os.path.basename(handle.path)}" if handle.path else "inline"

    print()
    print(f"{'populate':<26}{populate_seconds:>8.2f} s")
    print(f"{'checkpoint, sync part':<26}{sync_seconds:>8.3f} s   {args.key_groups} map snapshots, references only")
    print(f"{'checkpoint, async write':<26}{async_seconds:>8.2f} s   {size / MB:>7.1f} MB  "
          f"{size / MB / async_seconds:>6.1f} MB/s   {storage}")
    print(f"{'restore':<26}{restore_seconds:>8.2f} s   {size / MB:>7.1f} MB  "
          f"{size / MB / restore_seconds:>6.1f} MB/s   {args.entries:,} entries, "
          f"equal to the original: {'yes' if equal else 'NO'}")
    print(f"{'round trip':<26}{async_seconds + sync_seconds + restore_seconds:>8.2f} s")
    print()
    print("memory (live data: resident set; the rest: tracemalloc)")
    print(f"  {'live data (RSS growth)':<34}{live_bytes / MB:>9.1f} MB")
    print(f"  {'sync part allocates':<34}{sync_bytes / MB:>9.1f} MB   bucket-head arrays of the map snapshots")
    print(f"  {'async write peak':<34}{async_peak / MB:>9.2f} MB   beyond what existed when it started")
    print(f"  {'largest key group':<34}{largest_group / MB:>9.2f} MB   whole checkpoint {size / MB:.1f} MB")
    print(f"  async peak = {async_peak / largest_group:.1f} x largest key group = "
          f"{async_peak / size:.3f} x checkpoint = {async_peak / live_bytes:.4f} x live data")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
