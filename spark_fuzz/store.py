"""A campaign directory: manifest, Parquet tables and counterexamples, written atomically.

Layout of ``DIR``::

    campaign.json        the manifest: format, the CampaignConfig, the seed plan
    runs/part-*.parquet  one row per finished seed range (RUNS_SCHEMA)
    failures/part-*.parquet  one row per failing seed (FAILURES_SCHEMA)
    counterexamples/     one JSON file per distinct signature (`cowcheck replay FILE`)
    report.md, report.html, plots/*.png

Every file appears whole or not at all: each is written to a hidden temporary
file beside it and renamed into place (``properties.core.files.write_atomically``;
readers never look at the hidden names). A batch
of results writes its ``failures`` part before its ``runs`` part, and a
failure row counts only if its seed range has a ``runs`` row: a campaign
killed between the two renames re-runs that range on ``--resume`` and loses
nothing. Both tables read with Spark (``spark.read.parquet("DIR/runs")``),
pandas or pyarrow.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from properties.core.counterexample import Counterexample, save
from properties.core.files import write_atomically

__all__ = ["CampaignStore", "CampaignStoreError", "RUNS_SCHEMA", "FAILURES_SCHEMA", "MANIFEST_FORMAT"]

MANIFEST_FORMAT = "cowcheck-campaign"
MANIFEST_VERSION = 2  # 2: internal counts and error details (cowcheck's own errors)

_COUNTS = pa.map_(pa.string(), pa.int64())
RUNS_SCHEMA = pa.schema([
    ("range_start", pa.int64()), ("range_stop", pa.int64()), ("seeds", pa.int64()), ("ops", pa.int64()),
    ("seconds", pa.float64()), ("started", pa.float64()), ("finished", pa.float64()),
    ("host", pa.string()), ("pid", pa.int64()), ("round", pa.int64()), ("passed", pa.int64()),
    ("divergence", pa.int64()), ("invariant", pa.int64()), ("crash", pa.int64()), ("timeout", pa.int64()),
    ("internal", pa.int64()), ("coverage", _COUNTS), ("op_mix", _COUNTS), ("findings", _COUNTS),
    ("impl", pa.string()), ("executor", pa.string()),
    ("startups", pa.int64()), ("startup_seconds", pa.float64()),  # worker processes started, their start-up (JVM)
])
FAILURES_SCHEMA = pa.schema([
    ("signature", pa.string()), ("kind", pa.string()), ("code", pa.string()), ("seed", pa.int64()),
    ("range_start", pa.int64()), ("range_stop", pa.int64()), ("message", pa.string()),
    ("failing_op", pa.string()), ("ops", pa.int64()), ("original_steps", pa.int64()),
    ("shrunk_steps", pa.int64()), ("steps_json", pa.string()), ("counterexample_json", pa.string()),
    ("impl", pa.string()), ("executor", pa.string()), ("details", pa.string()),
    ("nondeterministic", pa.string()),  # "reproduced k of n replays" (null: every replay; older parts: null)
])
_MAPS = ("coverage", "op_mix", "findings")


class CampaignStoreError(ValueError):
    """``DIR`` cannot hold or resume this campaign; ``.path`` and ``.problem`` say why."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


class CampaignStore:
    """The campaign directory ``root``.

    >>> import tempfile
    >>> store = CampaignStore(tempfile.mkdtemp())
    >>> store.runs(), store.failures()
    ([], [])
    """

    def __init__(self, root) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.failures_dir = self.root / "failures"
        self.counterexamples_dir = self.root / "counterexamples"
        self.manifest_path = self.root / "campaign.json"
        self._parts = 0

    # ------------------------------------------------------------ manifest

    def manifest(self) -> dict | None:
        if not self.manifest_path.exists():
            return None
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CampaignStoreError(self.manifest_path, f"unreadable campaign manifest ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise CampaignStoreError(self.manifest_path, "not a cowcheck campaign manifest")
        if data.get("format_version") != MANIFEST_VERSION:
            raise CampaignStoreError(self.manifest_path, f"unknown manifest version {data.get('format_version')!r}")
        return data

    def begin(self, config: dict, resume: bool) -> None:
        """Create the campaign, or check that ``--resume`` continues the same one."""
        existing = self.manifest()
        if existing is None:
            if resume and self.root.exists() and any(self.root.iterdir()):
                raise CampaignStoreError(self.root, "has no campaign.json; nothing to resume")
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomically(self.manifest_path, json.dumps(
                {"format": MANIFEST_FORMAT, "format_version": MANIFEST_VERSION, "config": config}, indent=2) + "\n")
        elif not resume:
            raise CampaignStoreError(self.root, "already holds a campaign; add --resume to continue it, "
                                                "or choose another --out")
        elif existing["config"] != config:
            changed = sorted(k for k in set(config) | set(existing["config"])
                             if config.get(k) != existing["config"].get(k))
            detail = ", ".join(f"{k}: {existing['config'].get(k)!r} -> {config.get(k)!r}" for k in changed)
            raise CampaignStoreError(self.root, f"--resume with other settings than the campaign was started "
                                                f"with ({detail})")
        for directory in (self.runs_dir, self.failures_dir, self.counterexamples_dir):
            directory.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------- tables

    def append(self, runs: list[dict], failures: list[dict]) -> None:
        """Add rows (failures first: a failure row counts only once its range has a runs row)."""
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}-{self._parts:05d}"
        self._parts += 1
        if failures:
            self._write_part(self.failures_dir, f"part-{tag}.parquet", failures, FAILURES_SCHEMA)
        if runs:
            self._write_part(self.runs_dir, f"part-{tag}.parquet", runs, RUNS_SCHEMA)

    def _write_part(self, directory: Path, name: str, rows: list[dict], schema: pa.Schema) -> None:
        table = pa.Table.from_pylist([_to_arrow(row, schema) for row in rows], schema=schema)
        write_atomically(directory / name, lambda tmp: pq.write_table(table, tmp))

    def runs(self) -> list[dict]:
        """Every runs row (maps as dicts)."""
        return [_from_arrow(row) for row in _read(self.runs_dir, RUNS_SCHEMA)]

    def failures(self) -> list[dict]:
        """Failure rows whose seed range has a runs row, one per (seed, signature)."""
        done = {(r["range_start"], r["range_stop"]) for r in self.runs()}
        seen, out = set(), []
        for row in _read(self.failures_dir, FAILURES_SCHEMA):
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

    def save_counterexample(self, data: dict) -> tuple[Path, bool]:
        """Store counterexample JSON data under its signature (a shorter program wins)."""
        return save(Counterexample.from_json(data), self.counterexamples_dir)

    def put_counterexample(self, data: dict) -> Path:
        """Store exactly this counterexample under its signature (the campaign's chosen one)."""
        path = self.counterexamples_dir / f"{data['signature']}.json"
        text = json.dumps(data, indent=2) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
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
    return pa.concat_tables([pq.read_table(p, schema=schema) for p in parts]).to_pylist()
