"""A campaign directory: manifest, Parquet tables and counterexamples, written atomically.

Layout of ``DIR``::

    campaign.json        the manifest: format, the CampaignConfig, the seed plan
    runs/part-*.parquet  one row per finished seed range (RUNS_SCHEMA)
    failures/part-*.parquet  one row per failing seed (FAILURES_SCHEMA)
    counterexamples/     one JSON file per distinct signature (`cowcheck replay FILE`), the text its
                         failure row carries
    report.md, report.html, plots/*.png

Every file appears whole or not at all: each is written to a hidden temporary
file beside it and renamed into place (``cowcheck.core.files.write_atomically``;
readers never look at the hidden names). A batch
of results writes its ``failures`` part before its ``runs`` part, and a
failure row counts only if its seed range has a ``runs`` row: a campaign
killed between the two renames re-runs that range on ``--resume`` and loses
nothing. Both tables read with Spark (``spark.read.parquet("DIR/runs")``),
pandas or pyarrow.

One run at a time: a run holds an OS lock on ``DIR/.campaign.lock``
(``flock``; the lock goes when the process does, however it ends), so a
second run of the same campaign (two ``--resume`` at once) is refused with
one line instead of running the same seeds twice. Everything read back from
``DIR`` (manifest, Parquet parts, counterexamples) is read as a user's file:
regular files only, size-capped (``cowcheck.core.files``); a damaged part
is bad input (exit 2), not cowcheck's error.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    import pyarrow as pa

from cowcheck.core.files import MIB, UserFileError, read_json, read_user_file, write_atomically

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock
    fcntl = None

__all__ = ["CampaignStore", "CampaignStoreError", "RUNS_SCHEMA", "FAILURES_SCHEMA", "MANIFEST_FORMAT", "space_columns",
           "space_of_row"]

MANIFEST_FORMAT = "cowcheck-campaign"
LOCK_NAME = ".campaign.lock"
MAX_MANIFEST_BYTES = MIB
MAX_PART_BYTES = 256 * MIB  # a part holds a few seconds of results
# 2: internal counts and error details (cowcheck's own errors); 3: state-space columns; 4: failures without
# steps_json, counterexample_json holding the counterexample file's text (a campaign of 3 resumes as 4).
MANIFEST_VERSION = 4
_RESUMABLE = (3, MANIFEST_VERSION)

@functools.cache
def _schemas() -> dict:
    """The tables' schemas, built when first needed: pyarrow (and numpy under it) loads with a
    campaign's first write or read, not with every command of the ``cowcheck`` line."""
    import pyarrow as pa

    counts = pa.map_(pa.string(), pa.int64())
    runs = pa.schema([
        ("range_start", pa.int64()), ("range_stop", pa.int64()), ("seeds", pa.int64()), ("ops", pa.int64()),
        ("seconds", pa.float64()), ("started", pa.float64()), ("finished", pa.float64()),
        ("host", pa.string()), ("pid", pa.int64()), ("round", pa.int64()), ("passed", pa.int64()),
        ("divergence", pa.int64()), ("invariant", pa.int64()), ("crash", pa.int64()), ("timeout", pa.int64()),
        ("internal", pa.int64()), ("coverage", counts), ("op_mix", counts), ("findings", counts),
        ("impl", pa.string()), ("executor", pa.string()),
        ("startups", pa.int64()), ("startup_seconds", pa.float64()),  # worker processes started, their start-up (JVM)
        # State-space coverage of the range's maps (cowcheck.map.space.SpaceCoverage, field by field).
        ("space_maps", pa.int64()), ("space_largest", pa.int64()), ("space_size_classes", counts),
        ("space_generations", pa.int64()), ("space_generations_total", pa.int64()),
        ("space_under_snapshot", pa.int64()), ("space_snapshots_alive", pa.int64()),
        ("space_table_lengths", pa.list_(pa.int64())), ("space_longest_chain", pa.int64()),
        ("space_keys", counts), ("space_namespaces", counts), ("space_fresh", pa.int64()), ("space_held", pa.int64()),
        ("space_white_box", pa.bool_()),
    ])
    failures = pa.schema([
        ("signature", pa.string()), ("kind", pa.string()), ("code", pa.string()), ("seed", pa.int64()),
        ("range_start", pa.int64()), ("range_stop", pa.int64()), ("message", pa.string()),
        ("failing_op", pa.string()), ("ops", pa.int64()), ("original_steps", pa.int64()),
        ("shrunk_steps", pa.int64()), ("counterexample_json", pa.string()),  # the file's text (null: none stored)
        ("impl", pa.string()), ("executor", pa.string()), ("details", pa.string()),
        ("nondeterministic", pa.string()),  # "reproduced k of n replays" (null: every replay; older parts: null)
    ])
    return {"RUNS_SCHEMA": runs, "FAILURES_SCHEMA": failures}


def __getattr__(name: str):
    if name in ("RUNS_SCHEMA", "FAILURES_SCHEMA"):
        return _schemas()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MAPS = ("coverage", "op_mix", "findings", "space_size_classes", "space_keys", "space_namespaces")


def space_columns(space: dict) -> dict:
    """A range's state-space coverage (``SpaceCoverage.to_json``) as the runs table's ``space_*`` columns."""
    return {"space_" + name: space.get(name, _EMPTY_SPACE[name]) for name in _EMPTY_SPACE}


def space_of_row(row: dict) -> dict:
    """The ``SpaceCoverage.to_json`` form of a runs row's ``space_*`` columns (zeros for rows without them)."""
    out = {}
    for name, empty in _EMPTY_SPACE.items():
        value = row.get("space_" + name)
        out[name] = empty if value is None else (dict(value) if isinstance(empty, dict) else value)
    return out


_EMPTY_SPACE = {"maps": 0, "largest": 0, "size_classes": {}, "generations": 0, "generations_total": 0,
                "under_snapshot": 0, "snapshots_alive": 0, "table_lengths": [], "longest_chain": 0, "keys": {},
                "namespaces": {}, "fresh": 0, "held": 0, "white_box": False}


class CampaignStoreError(ValueError):
    """``DIR`` cannot hold or resume this campaign; ``.path`` and ``.problem`` say why."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


class CampaignStore:
    """The campaign directory ``root``. ``defaults``: the value a setting has in a manifest
    written before the setting existed (``CampaignConfig``'s defaults), so such a campaign
    resumes with its settings as they were.

    >>> import tempfile
    >>> store = CampaignStore(tempfile.mkdtemp())
    >>> store.runs(), store.failures()
    ([], [])
    """

    def __init__(self, root, defaults: dict | None = None) -> None:
        self.root = Path(root)
        self.defaults = dict(defaults or {})
        self.runs_dir = self.root / "runs"
        self.failures_dir = self.root / "failures"
        self.counterexamples_dir = self.root / "counterexamples"
        self.manifest_path = self.root / "campaign.json"
        self._parts = 0
        self._lock_fd: int | None = None

    # ------------------------------------------------------------ manifest

    def manifest(self) -> dict | None:
        if not os.path.lexists(self.manifest_path):
            return None
        try:
            data = read_json(self.manifest_path, what="a campaign manifest", limit=MAX_MANIFEST_BYTES)
        except UserFileError as exc:
            raise CampaignStoreError(self.manifest_path, f"unreadable campaign manifest ({exc.problem})") from None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise CampaignStoreError(self.manifest_path, "not a cowcheck campaign manifest")
        if data.get("format_version") not in _RESUMABLE:
            raise CampaignStoreError(self.manifest_path, f"unknown manifest version {data.get('format_version')!r}")
        return data

    def acquire(self, config: dict, resume: bool) -> None:
        """Check that this run may start (``begin``'s checks, nothing written but the
        directory and its lock) and take the campaign's lock; CampaignStoreError if
        another run holds it. Idempotent; ``close`` releases it."""
        self._check(config, resume)
        if self._lock_fd is not None:
            return
        if self.root.exists() and not self.root.is_dir():
            raise CampaignStoreError(self.root, "is a file, not a campaign directory")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:  # a full disk, a read-only file system
            raise CampaignStoreError(self.root, f"cannot make its lock ({exc.strerror or exc})") from None
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "unknown"
                os.close(fd)
                raise CampaignStoreError(self.root, f"is in use by another run of this campaign ({holder}); wait "
                                                    f"for it to end, or choose another --out") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        except OSError as exc:
            os.close(fd)
            raise CampaignStoreError(self.root, f"cannot write its lock ({exc.strerror or exc})") from None
        self._lock_fd = fd
        self._check(config, resume)  # again under the lock: a run that just ended may have started it

    def close(self) -> None:
        """Release the campaign's lock (the end of the process does too)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _check(self, config: dict, resume: bool) -> None:
        existing = self.manifest()
        if existing is None:
            if resume and self.root.is_dir() and any(p.name != LOCK_NAME for p in self.root.iterdir()):
                raise CampaignStoreError(self.root, "has no campaign.json; nothing to resume")
        elif not resume:
            raise CampaignStoreError(self.root, "already holds a campaign; add --resume to continue it, "
                                                "or choose another --out")
        elif dict(self.defaults, **existing["config"]) != dict(self.defaults, **config):
            before, now = dict(self.defaults, **existing["config"]), dict(self.defaults, **config)
            changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
            detail = ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in changed)
            raise CampaignStoreError(self.root, f"--resume with other settings than the campaign was started "
                                                f"with ({detail})")

    def begin(self, config: dict, resume: bool) -> None:
        """Create the campaign, or check that ``--resume`` continues the same one; takes the lock."""
        self.acquire(config, resume)
        existing = self.manifest()
        if existing is None or existing["format_version"] != MANIFEST_VERSION or existing["config"] != config:
            # new, or resumed from version 3 (or with settings added since: their defaults written out)
            write_atomically(self.manifest_path, json.dumps(
                {"format": MANIFEST_FORMAT, "format_version": MANIFEST_VERSION, "config": config}, indent=2) + "\n")
        for directory in (self.runs_dir, self.failures_dir, self.counterexamples_dir):
            directory.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------- tables

    def append(self, runs: list[dict], failures: list[dict]) -> None:
        """Add rows (failures first: a failure row counts only once its range has a runs row)."""
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}-{self._parts:05d}"
        self._parts += 1
        if failures:
            self._write_part(self.failures_dir, f"part-{tag}.parquet", failures, _schemas()["FAILURES_SCHEMA"])
        if runs:
            self._write_part(self.runs_dir, f"part-{tag}.parquet", runs, _schemas()["RUNS_SCHEMA"])

    def _write_part(self, directory: Path, name: str, rows: list[dict], schema: pa.Schema) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([_to_arrow(row, schema) for row in rows], schema=schema)
        write_atomically(directory / name, lambda tmp: pq.write_table(table, tmp))

    def runs(self) -> list[dict]:
        """Every runs row (maps as dicts)."""
        return [_from_arrow(row) for row in _read(self.runs_dir, _schemas()["RUNS_SCHEMA"])]

    def failures(self) -> list[dict]:
        """Failure rows whose seed range has a runs row, one per (seed, signature)."""
        done = {(r["range_start"], r["range_stop"]) for r in self.runs()}
        seen, out = set(), []
        for row in _read(self.failures_dir, _schemas()["FAILURES_SCHEMA"]):
            key = (row["seed"], row["signature"])
            if (row["range_start"], row["range_stop"]) in done and key not in seen:
                seen.add(key)
                out.append(row)
        return out

    def completed_seeds(self) -> list[tuple[int, int]]:
        """Finished seed ranges ``(start, stop)``, sorted."""
        return sorted({(r["range_start"], r["range_stop"]) for r in self.runs()})

    # ------------------------------------------------------ internal errors

    @property
    def internal_errors_dir(self) -> Path:
        return self.root / "internal-errors"

    def save_internal_error(self, row: dict) -> Path:
        """The traceback of a seed on which cowcheck itself failed, as a text file."""
        path = self.internal_errors_dir / f"seed-{row['seed']}.txt"
        write_atomically(path, f"{row['message']}\n\n{row.get('details') or ''}")
        return path

    # ----------------------------------------------------- counterexamples

    def put_counterexample(self, signature: str, text: str, directory=None) -> Path:
        """Store the campaign's chosen counterexample of ``signature``, its file's ``text`` as the
        seed's worker rendered it, unless the file holds it already; in the campaign's
        counterexamples directory or ``directory``."""
        path = Path(directory or self.counterexamples_dir) / f"{signature}.json"
        try:
            same = read_user_file(path, what="a counterexample", limit=4 * len(text) + 1) == text.encode("utf-8")
        except UserFileError:
            same = False
        if not same:
            write_atomically(path, text)
        return path


def _to_arrow(row: dict, schema: pa.Schema) -> dict:
    return {name: (sorted(row[name].items()) if name in _MAPS else row.get(name)) for name in schema.names}


def _from_arrow(row: dict) -> dict:
    return {k: (dict(v) if k in _MAPS else v) for k, v in row.items()}


def _read(directory: Path, schema: pa.Schema) -> Iterable[dict]:
    if not directory.is_dir():
        return []
    parts = sorted(p for p in directory.glob("part-*.parquet"))
    if not parts:
        return []
    import pyarrow as pa

    return pa.concat_tables([_read_part(p, schema) for p in parts]).to_pylist()


def _read_part(path: Path, schema: pa.Schema) -> pa.Table:
    """One Parquet part, read as a user's file; CampaignStoreError if it is not one of ours."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        data = read_user_file(path, what="a Parquet part of a campaign", limit=MAX_PART_BYTES)
        table = pq.read_table(pa.BufferReader(data), schema=schema)
        if schema is _schemas()["FAILURES_SCHEMA"] and "steps_json" in pq.read_schema(pa.BufferReader(data)).names:
            table = _as_version_4(table)
        return table
    except UserFileError as exc:
        raise CampaignStoreError(path, exc.problem) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CampaignStoreError(path, f"not a Parquet part of this campaign ({type(exc).__name__}: "
                                       f"{str(exc)[:200]})") from None


def _as_version_4(table: pa.Table) -> pa.Table:
    """A failures part of a version 3 campaign (its counterexamples as compact JSON) with each
    counterexample as its file's text, as version 4 carries it (the text the file was written with)."""
    import pyarrow as pa

    column = table.schema.get_field_index("counterexample_json")
    texts = [None if data is None else json.dumps(json.loads(data), indent=2) + "\n"
             for data in table.column(column).to_pylist()]
    return table.set_column(column, "counterexample_json", pa.array(texts, pa.string()))
