"""Per-key-group checkpoint bytes of Flink's table against the reference's, on one release.

``python -m cowcheck.flink.table_parity VERSION [PROGRAMS]`` (one process per
release: one JVM, one release) runs seeded table programs — puts, re-registration,
snapshots, in-place mutation only where no snapshot is live, so that the
FLINK-26853 releases are held to the same bytes too — on the reference table and
on Flink's, writes every key group of every snapshot with ``write_key_group``
(Flink: ``writeStateInKeyGroup``) and prints one JSON line: key groups compared,
bytes written, and the first mismatches.
"""

from __future__ import annotations

import io
import json
import random
import sys

__all__ = ["compare"]


def _program(seed: int) -> list:
    r = random.Random(seed)
    steps, live = [], 0
    for _ in range(r.randint(20, 200)):
        x = r.random()
        key, namespace = r.randrange(300), r.randrange(3)
        if x < 0.6:
            steps.append(("put", key, namespace, [r.randrange(100) for _ in range(r.randint(0, 4))]))
        elif x < 0.65:
            steps.append(("set_meta_info",))
        elif x < 0.8 and not live:
            steps.append(("get_mutate", key, namespace, r.randrange(100)))
        elif x < 0.9:
            steps.append(("snapshot",))
            live += 1
        elif live:
            steps.append(("write",))
            live -= 1
    return steps + [("write",)] * live


def compare(programs: int = 20) -> dict:
    from cowcheck.core.states import write_serializers
    from cowcheck.flink.table import FlinkStateTable
    from cowcheck.table import reference_table

    compared, written, mismatches = 0, 0, []
    for seed in range(programs):
        tables = [reference_table(), FlinkStateTable()]
        pending: list[list] = [[], []]
        for step in _program(seed):
            for side, table in enumerate(tables):
                if step[0] == "put":
                    table.put(step[1], step[2], list(step[3]))
                elif step[0] == "set_meta_info":
                    table.set_meta_info()
                elif step[0] == "get_mutate":
                    got = table.get(step[1], step[2])
                    if got is not None:
                        got.append(step[3])
                elif step[0] == "snapshot":
                    pending[side].append(table.snapshot())
            if step[0] == "write":
                snapshots = [pending[0].pop(0), pending[1].pop(0)]
                for group in range(128):
                    outs = []
                    for snap in snapshots:
                        out = io.BytesIO()
                        snap.write_key_group(out, group, *write_serializers())
                        outs.append(out.getvalue())
                    compared += 1
                    written += len(outs[1])
                    if outs[0] != outs[1] and len(mismatches) < 3:
                        mismatches.append({"seed": seed, "key_group": group, "reference": outs[0].hex()[:80],
                                           "flink": outs[1].hex()[:80]})
    return {"key_groups": compared, "bytes": written, "mismatches": mismatches}


def main(argv: list[str]) -> int:
    from cowcheck.flink.releases import select_release

    select_release(argv[0])
    print(json.dumps(dict(compare(int(argv[1]) if len(argv) > 1 else 20), release=argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
