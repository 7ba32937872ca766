"""Campaign reports: rows in, ``report.md``, ``report.html`` and plots out. No Spark.

Everything here is a function of the ``runs`` and ``failures`` rows (the
Parquet tables of spark_fuzz.store, as dicts), so a report can be rebuilt
from a campaign directory at any time and tested without a cluster::

    from spark_fuzz.driver import distinct_failures_locally
    from spark_fuzz.store import CampaignStore
    store = CampaignStore("DIR")
    failures = store.failures()
    write_report(store.root, store.runs(), failures, distinct_failures_locally(failures), config, {})

Plots are drawn with matplotlib's Agg canvas (no pyplot, no global backend
switch) and referenced by both reports from ``plots/``.
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

import attrs

from properties.core.contract import entries, pointer
from properties.core.counterexample import replay_command as cx_replay_command
from properties.core.files import write_atomically
from properties.map.scenarios import BLACK_BOX_SCENARIOS, MAP_SCENARIOS
from properties.map.space import SpaceCoverage
from spark_fuzz.store import space_of_row

__all__ = ["Summary", "summarise", "busy_seconds", "throughput_segments", "totals", "replay_command",
           "render_markdown", "render_html", "write_report", "PLOTS", "failure_kind"]

PLOTS = {
    "throughput": ("plots/throughput.png", "Throughput per partition over time"),
    "op_mix": ("plots/op_mix.png", "Operation mix"),
    "coverage": ("plots/coverage.png", "Scenario coverage (docs/contract.md §13)"),
}


@attrs.frozen
class Summary:
    """The numbers of the summary table."""

    impl: str
    executor: str
    seeds: int
    ranges: int
    ops: int
    busy_seconds: float
    task_seconds: float
    kinds: dict
    failures: int
    distinct: int
    startups: int = 0  # worker processes started (for Flink: one JVM each)
    startup_seconds: float = 0.0  # the start-up paid inside them

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.busy_seconds if self.busy_seconds else 0.0

    @property
    def ops_per_task_second(self) -> float:
        return self.ops / self.task_seconds if self.task_seconds else 0.0


def busy_seconds(runs: list[dict]) -> float:
    """Wall time during which at least one range was running (the union of
    their intervals), so a resumed campaign does not count the pause.

    >>> busy_seconds([{"started": 0, "finished": 2}, {"started": 1, "finished": 3}, {"started": 10, "finished": 11}])
    4.0
    """
    total, end = 0.0, None
    for start, finish in sorted((r["started"], r["finished"]) for r in runs):
        if end is None or start > end:
            total += finish - start
            end = finish
        elif finish > end:
            total += finish - end
            end = finish
    return float(total)


def totals(runs: list[dict], column: str) -> Counter:
    """Sum of a map column (``coverage``, ``op_mix``, ``findings``) over the rows."""
    out: Counter = Counter()
    for row in runs:
        out.update(row[column])
    return out


def space_totals(runs: list[dict]) -> SpaceCoverage:
    """The state-space coverage of every range, summed (``space_*`` columns)."""
    total = SpaceCoverage()
    for row in runs:
        total.update(SpaceCoverage.from_json(space_of_row(row)))
    return total


def summarise(runs: list[dict], failures: list[dict], distinct: list[dict], impl: str, executor: str) -> Summary:
    kinds = Counter()
    for row in runs:
        for kind in ("passed", "divergence", "invariant", "crash", "timeout", "internal"):
            kinds[kind] += row.get(kind) or 0
    return Summary(impl, executor, sum(r["seeds"] for r in runs), len(runs), sum(r["ops"] for r in runs),
                   busy_seconds(runs), sum(r["seconds"] for r in runs), dict(kinds), len(failures), len(distinct),
                   sum(r.get("startups") or 0 for r in runs), sum(r.get("startup_seconds") or 0.0 for r in runs))


def throughput_segments(runs: list[dict]) -> list[tuple[str, float, float, float]]:
    """One ``(worker, start, end, ops/s)`` per range (partition), times relative to the first start."""
    if not runs:
        return []
    origin = min(r["started"] for r in runs)
    out = []
    for r in sorted(runs, key=lambda r: (r["started"], r["range_start"])):
        span = max(r["finished"] - r["started"], 1e-9)
        out.append((f"{r['host']}:{r['pid']}", r["started"] - origin, r["finished"] - origin, r["ops"] / span))
    return out


def replay_command(out_dir, row: dict) -> str:
    """How to look at a distinct failure: replay its counterexample, or re-run its seed."""
    if row.get("counterexample_json"):
        return cx_replay_command(Path(out_dir) / "counterexamples" / (row["signature"] + ".json"), row["impl"])
    return (f"cowcheck campaign --impl {row['impl']} --executor {row['executor']} "
            f"--seeds {row['seed']}:{row['seed'] + 1} --out {Path(out_dir) / ('seed-' + str(row['seed']))}")


# ------------------------------------------------------------------ plots


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path) -> None:
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", bbox_inches="tight"))


def plot_throughput(runs: list[dict], path: Path) -> None:
    figure = _figure(9, 4)
    axes = figure.add_subplot()
    segments = throughput_segments(runs)
    workers = sorted({s[0] for s in segments})
    colours = {w: f"C{i % 10}" for i, w in enumerate(workers)}
    for worker, start, end, rate in segments:
        axes.plot([start, end], [rate, rate], color=colours[worker], linewidth=2.5, solid_capstyle="butt")
    for worker in workers[:10]:
        axes.plot([], [], color=colours[worker], linewidth=2.5, label=worker)
    if workers:
        axes.legend(title="worker (host:pid)", fontsize="small", loc="lower right")
    axes.set_xlabel("seconds since the first range started")
    axes.set_ylabel("checked ops/s of the range")
    axes.set_title("Throughput per partition (one segment per seed range)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    _save(figure, path)


def _bars(counts: list[tuple[str, int]], path: Path, title: str, xlabel: str, log: bool = False) -> None:
    figure = _figure(9, 0.3 * max(len(counts), 4) + 1)
    axes = figure.add_subplot()
    names = [name for name, _ in counts]
    values = [value for _, value in counts]
    colours = ["C3" if value == 0 else "C0" for value in values]
    axes.barh(range(len(names)), [max(v, 0.5) if log else v for v in values], color=colours)
    axes.set_yticks(range(len(names)), names, fontsize="small")
    axes.invert_yaxis()
    if log:
        axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    axes.grid(axis="x", alpha=0.3)
    _save(figure, path)


def plot_op_mix(runs: list[dict], path: Path) -> None:
    mix = totals(runs, "op_mix")
    _bars(sorted(mix.items(), key=lambda kv: -kv[1]), path, "Operation mix (steps applied)", "steps")


def plot_coverage(runs: list[dict], path: Path, white_box: bool = True) -> None:
    coverage = totals(runs, "coverage")
    names = MAP_SCENARIOS if white_box else BLACK_BOX_SCENARIOS
    _bars([(name, coverage.get(name, 0)) for name in names], path,
          "Scenario hits (docs/contract.md §13; red: never reached)", "hits (log scale)", log=True)


# ---------------------------------------------------------------- reports


def _coverage_rows(runs: list[dict], white_box: bool) -> list[tuple[str, str, int]]:
    coverage = totals(runs, "coverage")
    names = MAP_SCENARIOS if white_box else {k: MAP_SCENARIOS[k] for k in BLACK_BOX_SCENARIOS}
    return [(name, description, coverage.get(name, 0)) for name, description in names.items()]


def failure_kind(row: dict) -> str:
    """``KIND CODE``, with ``(nondeterministic: reproduced k of n replays)`` if the row's program
    did not fail in every replay."""
    mark = row.get("nondeterministic")
    return f"{row['kind']} {row['code']}" + (f" (nondeterministic: {mark})" if mark else "")


def _failure_table(out_dir, distinct: list[dict]) -> list[list[str]]:
    return [[row["signature"], failure_kind(row), str(row["seed"]), str(row.get("occurrences", 1)),
             "" if row["shrunk_steps"] is None else str(row["shrunk_steps"]), replay_command(out_dir, row)]
            for row in distinct]


def _code_lines(distinct: list[dict]) -> list[str]:
    """What each failing code means: its title in the contract and where to read it."""
    codes = dict.fromkeys(row["code"] for row in distinct)
    known = entries()
    return [f"{code}: {known[code].title + ' ' if code in known else ''}{pointer(code)}" for code in codes]


def _summary_rows(s: Summary, meta: dict) -> list[tuple[str, str]]:
    rows = [("implementation", s.impl), ("executor", s.executor),
            ("invariant checks", meta.get("invariants", "")),
            ("master / partitions", f"{meta.get('master', '')} / {meta.get('partitions', '')}"),
            ("seeds", f"{s.seeds:,} in {s.ranges:,} ranges"),
            ("checked ops", f"{s.ops:,}"),
            ("wall time (ranges running)", f"{s.busy_seconds:,.1f} s"),
            ("checked ops/s (wall)", f"{s.ops_per_second:,.0f}"),
            ("checked ops per task-second", f"{s.ops_per_task_second:,.0f}"),
            ("worker processes started", f"{s.startups:,}" + (
                f" ({s.startup_seconds:,.1f} s of JVM start inside them, {s.startup_seconds / s.startups:.2f} s "
                f"each)" if s.startup_seconds else "") if s.startups else ""),
            ("outcomes", ", ".join(f"{k} {v:,}" for k, v in s.kinds.items() if v) or "none"),
            ("failing seeds", f"{s.failures:,}"),
            ("distinct failures", f"{s.distinct:,}"),
            ("internal errors of cowcheck", f"{s.kinds['internal']:,} seeds (tracebacks in internal-errors/)"
             if s.kinds.get("internal") else "")]
    return [(k, v) for k, v in rows if v not in ("", " / ")]


def render_markdown(out_dir, runs: list[dict], failures: list[dict], distinct: list[dict], impl: str,
                    executor: str, meta: dict) -> str:
    s = summarise(runs, failures, distinct, impl, executor)
    white_box = meta.get("white_box", True)
    lines = [f"# cowcheck campaign: {impl}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _summary_rows(s, meta)]
    lines += ["", "## Distinct failures", ""]
    if distinct:
        lines += ["| signature | kind | first seed | seeds | steps | replay |", "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cells[:5]) + f" | `{cells[5]}` |" for cells in _failure_table(out_dir, distinct)]
        lines += [""] + [f"- {line}" for line in _code_lines(distinct)]
    else:
        lines.append("None: every seed passed.")
    rows = _coverage_rows(runs, white_box)
    reached = sum(1 for _, _, hits in rows if hits)
    lines += ["", f"## Scenario coverage (docs/contract.md §13): {reached}/{len(rows)} reached", "",
              "| scenario | hits |", "|---|---|"]
    lines += [f"| {description} | {hits:,}{'  **never reached**' if not hits else ''} |"
              for _, description, hits in rows]
    space = space_totals(runs).lines()
    if space:
        lines += ["", "## State space explored", "", "```"] + [line.strip() for line in space] + ["```"]
    findings = totals(runs, "findings")
    if findings:
        lines += ["", "## Findings (reported, not failures)", ""]
        lines += [f"- {name}: {count:,}" for name, count in sorted(findings.items())]
    lines += ["", "## Plots", ""]
    lines += [f"![{title}]({file})" for file, title in PLOTS.values()]
    return "\n".join(lines) + "\n"


_STYLE = ("<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
          "code{font-size:90%}.never{color:#b00;font-weight:bold}</style>")


def render_html(out_dir, runs: list[dict], failures: list[dict], distinct: list[dict], impl: str, executor: str,
                meta: dict) -> str:
    e = html.escape
    s = summarise(runs, failures, distinct, impl, executor)
    white_box = meta.get("white_box", True)
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
             f"<title>cowcheck campaign: {e(impl)}</title>", _STYLE, "</head><body>",
             f"<h1>cowcheck campaign: {e(impl)}</h1>", "<table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _summary_rows(s, meta)]
    parts += ["</table>", "<h2>Distinct failures</h2>"]
    if distinct:
        parts.append("<table><tr><th>signature</th><th>kind</th><th>first seed</th><th>seeds</th><th>steps</th>"
                     "<th>replay</th></tr>")
        for cells in _failure_table(out_dir, distinct):
            parts.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells[:5])
                         + f"<td><code>{e(cells[5])}</code></td></tr>")
        parts.append("</table>")
        parts += ["<ul>"] + [f"<li>{e(line)}</li>" for line in _code_lines(distinct)] + ["</ul>"]
    else:
        parts.append("<p>None: every seed passed.</p>")
    rows = _coverage_rows(runs, white_box)
    reached = sum(1 for _, _, hits in rows if hits)
    parts += [f"<h2>Scenario coverage (docs/contract.md §13): {reached}/{len(rows)} reached</h2>",
              "<table><tr><th>scenario</th><th>hits</th></tr>"]
    parts += [f"<tr><td>{e(description)}</td><td{' class=never' if not hits else ''}>"
              f"{hits:,}{' never reached' if not hits else ''}</td></tr>" for _, description, hits in rows]
    parts.append("</table>")
    space = space_totals(runs).lines()
    if space:
        parts += ["<h2>State space explored</h2>", "<ul>"]
        parts += [f"<li{' class=never' if line.strip().startswith('never reached') else ''}>{e(line.strip())}</li>"
                  for line in space]
        parts.append("</ul>")
    findings = totals(runs, "findings")
    if findings:
        parts += ["<h2>Findings (reported, not failures)</h2>", "<ul>"]
        parts += [f"<li>{e(name)}: {count:,}</li>" for name, count in sorted(findings.items())]
        parts.append("</ul>")
    parts.append("<h2>Plots</h2>")
    parts += [f"<h3>{e(title)}</h3><img src='{e(file)}' alt='{e(title)}'>" for file, title in PLOTS.values()]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(out_dir, runs: list[dict], failures: list[dict], distinct: list[dict], config, meta: dict):
    """Plots, report.md and report.html into ``out_dir`` (each written atomically);
    returns the paths of the two reports."""
    root = Path(out_dir)
    white_box = meta.get("white_box", True)
    plot_throughput(runs, root / PLOTS["throughput"][0])
    plot_op_mix(runs, root / PLOTS["op_mix"][0])
    plot_coverage(runs, root / PLOTS["coverage"][0], white_box)
    args = (root, runs, failures, distinct, config.impl, config.executor, meta)
    write_atomically(root / "report.md", render_markdown(*args))
    write_atomically(root / "report.html", render_html(*args))
    return root / "report.md", root / "report.html"
