"""Campaign reports: rows in, ``report.md``, ``report.html`` and plots out. No Spark.

Everything here is a function of the ``runs`` and ``failures`` rows (the
Parquet tables of cowcheck.spark_fuzz.store, as dicts), so a report can be rebuilt
from a campaign directory at any time and tested without a cluster::

    from cowcheck.spark_fuzz.driver import distinct_failures
    from cowcheck.spark_fuzz.store import CampaignStore
    store = CampaignStore("DIR")
    failures = store.failures()
    write_report(store.root, store.runs(), failures, distinct_failures(failures), config, {})

Plots are drawn with matplotlib's Agg canvas (no pyplot, no global backend
switch) into ``plots/``: report.md links them, report.html carries them inline
(one file to keep as a CI artifact).

One throughput figure, :data:`HEADLINE` (:data:`HEADLINE_DEFINITION`), is what
stdout, report.md and report.html print.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from pathlib import Path

import attrs

from cowcheck.core.contract import entries, pointer
from cowcheck.core.counterexample import Counterexample, CounterexampleError
from cowcheck.core.counterexample import replay_command as cx_replay_command
from cowcheck.core.impls import is_builtin
from cowcheck.core.machine import MACHINES, machine_kind
from cowcheck.core.files import write_atomically
from cowcheck.registry import DEFAULT_MACHINE
from cowcheck.map.space import SpaceCoverage
from cowcheck.spark_fuzz.store import space_of_row

__all__ = ["Summary", "summarise", "busy_seconds", "throughput_segments", "totals", "replay_command",
           "render_markdown", "render_html", "write_report", "PLOTS", "failure_kind", "HEADLINE",
           "HEADLINE_DEFINITION", "headline", "saturation", "program_of", "what_next"]

HEADLINE = "checked ops/s"
HEADLINE_DEFINITION = ("checked operations (keyed operations applied to the map and the model, P1-P7 checked "
                       "after their step; a bulk step of 1,000 keys counts 1,000) per second of wall time while "
                       "seed ranges ran (Spark's start-up and the pauses between resumed runs not counted)")
_PROGRAM_LINES = 60  # lines of a failure's program a report shows (the JSON has all of it)

PLOTS = {
    "saturation": ("plots/saturation.png", "Distinct failures and scenarios reached over time"),
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


def headline(runs: list[dict]) -> str:
    """``"N checked ops/s"`` over ``runs`` (:data:`HEADLINE_DEFINITION`), the figure every output prints.

    >>> headline([{"ops": 3000, "started": 0.0, "finished": 2.0}, {"ops": 1000, "started": 1.0, "finished": 2.0}])
    '2,000 checked ops/s'
    """
    busy = busy_seconds(runs)
    return f"{sum(r['ops'] for r in runs) / busy if busy else 0.0:,.0f} {HEADLINE}"


def saturation(runs: list[dict], failures: list[dict]) -> list[tuple[float, int, int]]:
    """``(seconds since the first range started, distinct failures known, scenarios reached)``
    after each range finished: flat lines mean more of the same seeds finds nothing new.

    >>> runs = [{"range_start": 0, "range_stop": 2, "started": 0.0, "finished": 1.0, "coverage": {"a": 1}},
    ...         {"range_start": 2, "range_stop": 4, "started": 0.0, "finished": 3.0, "coverage": {"a": 2, "b": 1}}]
    >>> saturation(runs, [{"range_start": 2, "range_stop": 4, "signature": "x"}])
    [(1.0, 0, 1), (3.0, 1, 2)]
    """
    if not runs:
        return []
    origin = min(r["started"] for r in runs)
    found: dict = {}
    for row in failures:
        found.setdefault((row["range_start"], row["range_stop"]), set()).add(row["signature"])
    known, reached, points = set(), set(), []
    for r in sorted(runs, key=lambda r: (r["finished"], r["range_start"])):
        known |= found.get((r["range_start"], r["range_stop"]), set())
        reached |= {name for name, hits in (r.get("coverage") or {}).items() if hits}
        points.append((round(r["finished"] - origin, 3), len(known), len(reached)))
    return points


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


def replay_command(out_dir, row: dict, machine: str = DEFAULT_MACHINE) -> str:
    """How to look at a distinct failure: replay its counterexample, or re-run its seed (of ``machine``)."""
    if row.get("counterexample_json"):
        return cx_replay_command(Path(out_dir) / "counterexamples" / (row["signature"] + ".json"), row["impl"])
    named = "" if machine == DEFAULT_MACHINE else f" --machine {machine}"
    return (f"cowcheck campaign{named} --impl {row['impl']} --executor {row['executor']} "
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


def plot_saturation(runs: list[dict], failures: list[dict], path: Path) -> None:
    figure = _figure(9, 3.5)
    axes = figure.add_subplot()
    points = saturation(runs, failures)
    times = [p[0] for p in points]
    axes.step(times, [p[1] for p in points], where="post", color="C3", label="distinct failures")
    axes.set_xlabel("seconds since the first range started")
    axes.set_ylabel("distinct failures", color="C3")
    axes.set_ylim(bottom=0)
    other = axes.twinx()
    other.step(times, [p[2] for p in points], where="post", color="C0", label="scenarios reached")
    other.set_ylabel("scenarios reached", color="C0")
    other.set_ylim(bottom=0)
    axes.set_title("Has the campaign saturated? (flat: more seeds found nothing new)")
    axes.grid(alpha=0.3)
    _save(figure, path)


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


def _scenarios(machine: str, white_box: bool) -> dict:
    """The scenarios a campaign of ``machine`` counts (those black-box checks can see, if black-box)."""
    kind = machine_kind(machine)
    if white_box or kind.black_box_scenarios is None:
        return dict(kind.scenarios)
    return {name: kind.scenarios[name] for name in kind.black_box_scenarios}


def plot_coverage(runs: list[dict], path: Path, white_box: bool = True, machine: str = DEFAULT_MACHINE) -> None:
    coverage = totals(runs, "coverage")
    names = _scenarios(machine, white_box)
    _bars([(name, coverage.get(name, 0)) for name in names], path,
          "Scenario hits (docs/contract.md §13; red: never reached)", "hits (log scale)", log=True)


# ---------------------------------------------------------------- reports


def _coverage_rows(runs: list[dict], white_box: bool, machine: str) -> list[tuple[str, str, int]]:
    coverage = totals(runs, "coverage")
    names = _scenarios(machine, white_box)
    return [(name, description, coverage.get(name, 0)) for name, description in names.items()]


def failure_kind(row: dict) -> str:
    """``KIND CODE``, with ``(nondeterministic: reproduced k of n replays)`` if the row's program
    did not fail in every replay."""
    mark = row.get("nondeterministic")
    return f"{row['kind']} {row['code']}" + (f" (nondeterministic: {mark})" if mark else "")


def _failure_table(out_dir, distinct: list[dict], machine: str) -> list[list[str]]:
    return [[row["signature"], failure_kind(row), str(row["seed"]), str(row.get("occurrences", 1)),
             "" if row["shrunk_steps"] is None else str(row["shrunk_steps"]), replay_command(out_dir, row, machine)]
            for row in distinct]


def _code_lines(distinct: list[dict]) -> list[str]:
    """What each failing code means: its title in the contract and where to read it."""
    codes = dict.fromkeys(row["code"] for row in distinct)
    known = entries()
    return [f"{code}: {known[code].title + ' ' if code in known else ''}{pointer(code)}" for code in codes]


def program_of(row: dict) -> list[str]:
    """A distinct failure's shrunk program as the Python ``cowcheck check`` prints (it fails by
    itself when pasted), at most :data:`_PROGRAM_LINES` lines; [] if the row has no counterexample."""
    if not row.get("counterexample_json"):
        return []
    try:
        cx = Counterexample.from_json(json.loads(row["counterexample_json"]))
        kind = machine_kind(cx.machine)
    except (CounterexampleError, ValueError):
        return []
    if kind.program is None:
        return [kind.render(step) for step in cx.steps]
    config = kind.config(capacity=cx.capacity, **cx.settings)
    lines = list(kind.program(list(cx.steps), cx.failure, cx.implementation, config))
    if len(lines) > _PROGRAM_LINES:
        lines = lines[:_PROGRAM_LINES] + [f"# ... {len(lines) - _PROGRAM_LINES} more lines: the JSON has them all"]
    return lines


def _json_link(row: dict) -> str:
    return f"counterexamples/{row['signature']}.json" if row.get("counterexample_json") else ""


def _findings(runs: list[dict]) -> list[tuple[str, int, str]]:
    """``(finding, count, what it means)``: reported behaviour that is not a failure."""
    explained = {name: text for kind in MACHINES.values() for name, text in kind.findings.items()}
    return [(name, count, explained.get(name, "")) for name, count in sorted(totals(runs, "findings").items())]


def what_next(out_dir, distinct: list[dict], runs: list[dict], space_lines: list[str], white_box: bool,
              machine: str = DEFAULT_MACHINE) -> list[str]:
    """What to do with this report, in the order a user would."""
    if distinct:
        first = distinct[0]
        steps = []
        if first.get("counterexample_json"):
            path = Path(out_dir) / _json_link(first)
            steps.append(f"Replay the first failure step by step: {replay_command(out_dir, first, machine)}")
            steps.append(f"Keep it as a regression test (written into tests/regressions/): cowcheck replay {path} "
                         f"--to-pytest" + ("" if is_builtin(first["impl"]) else f" --impl {first['impl']}"))
        else:
            steps.append(f"Run its seed again: {replay_command(out_dir, first, machine)}")
        steps.append(f"Read the rule it broke ({first['code']}): {pointer(first['code']).removeprefix('see: ')}")
        if len(distinct) > 1:
            steps.append(f"{len(distinct) - 1} more distinct failure{'s' if len(distinct) > 2 else ''} above: "
                         f"one bug can break several rules, so fix the first and run the campaign again")
        return steps
    steps = []
    never = [line.strip() for line in space_lines if line.strip().startswith("never reached")]
    if never:
        steps.append("Parts of the state space were never reached (" + "; ".join(never)[:300]
                     + "): run longer, or with --sizes large")
    if not white_box:
        steps.append("This run was black-box: a map with introspection (docs/introspection.md) is also "
                     "checked against the structural invariants I1-I9")
    steps.append("Nothing failed: keep the campaign in CI (a fixed --seeds range replays the same programs), "
                 "or resume it later with --resume --minutes M for new seeds")
    return steps


def _summary_rows(s: Summary, meta: dict) -> list[tuple[str, str]]:
    rows = [("implementation", s.impl), ("executor", s.executor),
            ("invariant checks", meta.get("invariants", "")),
            ("master / partitions", f"{meta.get('master', '')} / {meta.get('partitions', '')}"),
            ("seeds", f"{s.seeds:,} in {s.ranges:,} ranges"),
            ("checked ops", f"{s.ops:,}"),
            ("wall time (ranges running)", f"{s.busy_seconds:,.1f} s"),
            (f"{HEADLINE} *", f"{s.ops_per_second:,.0f}"),
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
    white_box, machine = meta.get("white_box", True), meta.get("machine", DEFAULT_MACHINE)
    lines = [f"# cowcheck campaign: {impl}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _summary_rows(s, meta)]
    lines += ["", f"\\* {HEADLINE}: {HEADLINE_DEFINITION}.", "", "## Distinct failures", ""]
    if distinct:
        lines += ["| signature | kind | first seed | seeds | steps | replay |", "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cells[:5]) + f" | `{cells[5]}` |"
                  for cells in _failure_table(out_dir, distinct, machine)]
        lines += [""] + [f"- {line}" for line in _code_lines(distinct)]
        for row in distinct:
            lines += ["", f"### {row['signature']}", "", f"{failure_kind(row)}, first at seed {row['seed']} "
                      f"({row.get('occurrences', 1):,} seed{'' if row.get('occurrences', 1) == 1 else 's'}); "
                      f"{pointer(row['code'])}", "", "```", row["message"], "```"]
            program = program_of(row)
            if program:
                lines += ["", f"Shrunk program ({row['shrunk_steps']} steps; pasted into a file, it fails on its "
                          f"own assertion):", "", "```python"] + program + ["```"]
            link = _json_link(row)
            lines += ["", f"Counterexample: [{link}]({link}); replay: `{replay_command(out_dir, row, machine)}`"
                      if link else f"Replay: `{replay_command(out_dir, row, machine)}`"]
    else:
        lines.append("None: every seed passed.")
    rows = _coverage_rows(runs, white_box, machine)
    reached = sum(1 for _, _, hits in rows if hits)
    lines += ["", f"## Scenario coverage (docs/contract.md §13): {reached}/{len(rows)} reached", "",
              "| scenario | hits |", "|---|---|"]
    lines += [f"| {description} | {hits:,}{'  **never reached**' if not hits else ''} |"
              for _, description, hits in rows]
    space = space_totals(runs).lines()
    if space:
        lines += ["", "## State space explored", "", "```"] + [line.strip() for line in space] + ["```"]
    findings = _findings(runs)
    if findings:
        lines += ["", "## Findings (reported, not failures)", ""]
        lines += [f"- {name} ({count:,}): {meaning}" for name, count, meaning in findings]
    lines += ["", "## What next", ""]
    lines += [f"{i}. {step}" for i, step in enumerate(what_next(out_dir, distinct, runs, space, white_box, machine), 1)]
    lines += ["", "## Plots", ""]
    lines += [f"![{title}]({file})" for file, title in PLOTS.values()]
    return "\n".join(lines) + "\n"


_STYLE = ("<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
          "pre{background:#f6f6f6;padding:.6em;overflow-x:auto}pre.message{white-space:pre-wrap;word-break:break-all}"
          "code{font-size:90%}.never{color:#b00;font-weight:bold}.note{color:#555;font-size:90%}</style>")


def _inline(root: Path, file: str) -> str:
    """A plot as a data: URI (the HTML report is one self-contained file)."""
    try:
        data = (root / file).read_bytes()
    except OSError:
        return ""
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def render_html(out_dir, runs: list[dict], failures: list[dict], distinct: list[dict], impl: str, executor: str,
                meta: dict) -> str:
    e = html.escape
    s = summarise(runs, failures, distinct, impl, executor)
    white_box, machine = meta.get("white_box", True), meta.get("machine", DEFAULT_MACHINE)
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
             f"<title>cowcheck campaign: {e(impl)}</title>", _STYLE, "</head><body>",
             f"<h1>cowcheck campaign: {e(impl)}</h1>", "<table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _summary_rows(s, meta)]
    parts += ["</table>", f"<p class=note>* {e(HEADLINE)}: {e(HEADLINE_DEFINITION)}.</p>",
              "<h2>Distinct failures</h2>"]
    if distinct:
        parts.append("<table><tr><th>signature</th><th>kind</th><th>first seed</th><th>seeds</th><th>steps</th>"
                     "<th>replay</th></tr>")
        for cells in _failure_table(out_dir, distinct, machine):
            parts.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells[:5])
                         + f"<td><code>{e(cells[5])}</code></td></tr>")
        parts.append("</table>")
        parts += ["<ul>"] + [f"<li>{e(line)}</li>" for line in _code_lines(distinct)] + ["</ul>"]
        for row in distinct:
            parts += [f"<h3>{e(row['signature'])}</h3>",
                      f"<p>{e(failure_kind(row))}, first at seed {row['seed']} ({row.get('occurrences', 1):,} "
                      f"seed{'' if row.get('occurrences', 1) == 1 else 's'}); {e(pointer(row['code']))}</p>",
                      f"<pre class=message>{e(row['message'])}</pre>"]
            program = program_of(row)
            if program:
                parts += [f"<p>Shrunk program ({row['shrunk_steps']} steps; pasted into a file, it fails on its own "
                          f"assertion):</p>", f"<pre><code>{e(chr(10).join(program))}</code></pre>"]
            link = _json_link(row)
            parts.append(f"<p>Counterexample: <a href='{e(link)}'>{e(link)}</a>; replay: "
                         f"<code>{e(replay_command(out_dir, row, machine))}</code></p>" if link else
                         f"<p>Replay: <code>{e(replay_command(out_dir, row, machine))}</code></p>")
    else:
        parts.append("<p>None: every seed passed.</p>")
    rows = _coverage_rows(runs, white_box, machine)
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
    findings = _findings(runs)
    if findings:
        parts += ["<h2>Findings (reported, not failures)</h2>", "<ul>"]
        parts += [f"<li>{e(name)} ({count:,}): {e(meaning)}</li>" for name, count, meaning in findings]
        parts.append("</ul>")
    parts += ["<h2>What next</h2>", "<ol>"]
    parts += [f"<li>{e(step)}</li>" for step in what_next(out_dir, distinct, runs, space, white_box, machine)]
    parts += ["</ol>", "<h2>Plots</h2>"]
    parts += [f"<h3>{e(title)}</h3><img src='{_inline(Path(out_dir), file)}' alt='{e(title)}'>"
              for file, title in PLOTS.values()]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(out_dir, runs: list[dict], failures: list[dict], distinct: list[dict], config, meta: dict):
    """Plots, report.md and report.html into ``out_dir`` (each written atomically);
    returns the paths of the two reports."""
    root = Path(out_dir)
    white_box = meta.get("white_box", True)
    plot_saturation(runs, failures, root / PLOTS["saturation"][0])
    plot_throughput(runs, root / PLOTS["throughput"][0])
    plot_op_mix(runs, root / PLOTS["op_mix"][0])
    machine = config.machine
    plot_coverage(runs, root / PLOTS["coverage"][0], white_box, machine)
    args = (root, runs, failures, distinct, config.impl, config.executor, dict(meta, machine=machine))
    write_atomically(root / "report.md", render_markdown(*args))
    write_atomically(root / "report.html", render_html(*args))
    return root / "report.md", root / "report.html"
