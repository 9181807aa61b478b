"""The benchmark report: ``bench/report.md`` plus PNG charts, from the JSON lines the benchmarks print.

``python -m bench.report`` runs the named workloads quickly (``--run kv compaction nexmark``,
the default; each a ``python -m bench.NAME`` subprocess with small arguments, see
:data:`QUICK_ARGS`) or, with ``--from FILE ...``, reads their JSON lines from files (any line
that is a JSON object with a ``"bench"`` key; other lines are skipped, so a saved console log
works). It writes ``--out`` (default ``bench/report.md``) with one section per workload:

- **KV vs rocksdict** (``bench.kv``: ``{"bench": "kv", "results": [{workload, hummock_ops_s,
  rocksdict_ops_s, ratio}]}``), chart ``report-kv.png``;
- **compaction runners** (``bench.compaction``: ``compaction_core`` and ``compaction_spark``
  lines, ``input_mb_s`` per runner), chart ``report-compaction.png``;
- **Nexmark per query** (``bench.nexmark``: ``{"bench": "nexmark", "events": N, "events_per_s":
  {...}, "checked": ...}``) beside RisingWave's published per-core rates, chart
  ``report-nexmark.png``;
- **Nexmark on the Spark runtime** (``bench.spark_stream``: ``{"bench": "spark_stream", "events_per_s":
  {runtime: {query: ...}}, "by_batch": {...}, "checked": ...}``; not run by ``--run``: it takes
  minutes, read its saved line with ``--from``), chart ``report-spark-stream.png``;
- **Batch queries vs DuckDB** (``bench.batch``: ``{"bench": "batch", "rows": N, "checked": ...,
  "results": [{query, hummock_ms, duckdb_ms, ratio, equal}]}``; read with ``--from``), chart
  ``report-batch.png``.

Charts are PNGs drawn by matplotlib (``pip install -e '.[report]'``); without it the same bar
charts are written as small SVGs by hand, and the report says so. The last JSON line of a kind wins. Callers: users, ``hummock bench report``, tests.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import subprocess
import sys

from bench.nexmark.queries import RISINGWAVE_PER_CORE

HERE = pathlib.Path(__file__).resolve().parent
QUICK_ARGS = {"kv": ["--keys", "50000", "--rss-keys", "0", "--seek-runs", "1"],
              "compaction": ["--quick"],
              "nexmark": ["--query", "all", "--events", "200000"]}


def json_lines(text: str) -> list:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "bench" in obj:
                out.append(obj)
    return out


def run_workload(name: str) -> tuple:
    """``(json lines, the command)`` of one quick run."""
    cmd = [sys.executable, "-m", f"bench.{name}", *QUICK_ARGS[name]]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
    if done.returncode != 0:
        print(f"bench.report: {' '.join(cmd[1:])} failed ({done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
    return json_lines(done.stdout), "python " + " ".join(cmd[1:])


def collect(lines) -> dict:
    """bench kind -> its last JSON object."""
    found = {}
    for obj in lines:
        found[obj["bench"]] = obj
    return found


# --- sections ------------------------------------------------------------------------------------

def _table(header, rows) -> list:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def _num(x, digits=0) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def kv_section(data) -> tuple:
    obj = data.get("kv")
    if obj is None:
        return [], None
    rows = obj["results"]
    lines = ["## KV: Hummock vs RocksDB (rocksdict)", "",
             "LevelDB's db_bench workloads, same process, same keys (`python -m bench.kv`); ops/s.", ""]
    lines += _table(["workload", "hummock ops/s", "rocksdict ops/s", "ratio"],
                    [(r["workload"], _num(r["hummock_ops_s"]), _num(r["rocksdict_ops_s"]), _num(r["ratio"], 2))
                     for r in rows])
    chart = {"title": "KV workloads (ops/s, log scale)", "labels": [r["workload"] for r in rows],
             "series": {"hummock": [r["hummock_ops_s"] for r in rows],
                        "rocksdict": [r["rocksdict_ops_s"] for r in rows]}, "log": True}
    return lines, chart


def compaction_section(data) -> tuple:
    rows = []
    for kind in ("compaction_core", "compaction_spark"):
        for r in (data.get(kind) or {}).get("results", []):
            rows.append((r.get("runner", kind), r.get("input_mb_s"), r.get("keys_s")))
    if not rows:
        return [], None
    lines = ["## Compaction runners", "",
             "One L0 -> base compaction task, in-process and as Spark jobs (`python -m bench.compaction`); "
             "Spark job time excludes the session start-up.", ""]
    lines += _table(["runner", "input MB/s", "keys/s"], [(n, _num(mb, 1), _num(k)) for n, mb, k in rows])
    chart = {"title": "Compaction throughput (input MB/s)", "labels": [r[0] for r in rows],
             "series": {"input MB/s": [r[1] or 0 for r in rows]}, "log": False}
    return lines, chart


def nexmark_section(data) -> tuple:
    obj = data.get("nexmark")
    if obj is None:
        return [], None
    rates = obj["events_per_s"]
    unsupported = set(obj.get("unsupported", []))
    names = sorted(set(rates) | set(RISINGWAVE_PER_CORE) | unsupported, key=lambda q: int(q[1:]))
    lines = ["## Nexmark per query", "",
             f"{obj.get('events', 0):,} events per query, one core, each MV checked against its batch "
             f"recomputation: **{'all equal' if obj.get('checked') else 'NOT checked or a mismatch'}** "
             "(`python -m bench.nexmark`). events/s counts all N events, but only the tables a query reads are "
             "fed (q3 and q8 read persons and auctions, 8 % of the events; the others bids, 92 %). "
             "RisingWave's published per-core rates (other hardware) for scale.", ""]
    unsupported = set(obj.get("unsupported", []))
    lines += _table(["query", "hummock events/s", "RisingWave events/s per core", "ratio"],
                    [(q, _num(rates.get(q)) or ("not supported yet" if q in unsupported else "-"),
                      _num(RISINGWAVE_PER_CORE.get(q)) or "-",
                      _num(rates[q] / RISINGWAVE_PER_CORE[q], 2) if q in rates and q in RISINGWAVE_PER_CORE else "")
                     for q in names])
    chart = {"title": f"Nexmark events/s per query ({obj.get('events', 0):,} events, one core)", "labels": names,
             "series": {"hummock": [rates.get(q, 0) for q in names],
                        "RisingWave (per core)": [RISINGWAVE_PER_CORE.get(q, 0) for q in names]}, "log": False}
    return lines, chart


def _feed_text(feed) -> str:
    if feed == "sql":
        return ("Both runtimes get the same Arrow tables through `insert_arrow` and `FLUSH` (`--feed sql`: the "
                "Spark driver routes the rows).")
    return ("The Spark runtime reads each batch's Parquet files as DataFrames inside the timing (`--feed "
            "dataframe`); in-process gets them as Arrow tables.")


def spark_stream_section(data) -> tuple:
    obj = data.get("spark_stream")
    if obj is None or not obj.get("events_per_s"):
        return [], None
    rates = obj["events_per_s"]
    runtimes = list(rates)
    names = sorted({q for r in rates.values() for q in r}, key=lambda q: int(q[1:]))
    base = rates.get("in_process", {})
    lines = ["## Nexmark on the Spark runtime", "",
             f"{obj.get('events', 0):,}-event micro-batches x {obj.get('batches', 0)} per query, one epoch per batch, "
             "the Spark runtime (`sql/spark_pipeline`) against the in-process runtime on the same events, each MV "
             f"checked against its batch recomputation: **{'all equal' if obj.get('checked') else 'NOT all equal'}** "
             f"(`python -m bench.spark_stream`); events/s (ratio to in-process). {_feed_text(obj.get('feed'))}", ""]
    lines += _table(["query", *runtimes],
                    [(q, *(_num(rates[r].get(q)) + (f" ({rates[r][q] / base[q]:.2f}x)" if r != "in_process" and
                                                    rates[r].get(q) and base.get(q) else "") for r in runtimes))
                     for q in names])
    head = (obj.get("by_batch") or {}).get(str(obj.get("events")), {})
    lat = head.get("epoch_ms", {})
    spark = head.get("spark", {})
    if lat:
        lines += ["", "Epoch latency (one batch, ms) and the Spark runtime's per-stage overhead (a stage's wall time "
                      "minus its slowest task's):", ""]
        lines += _table(["runtime", "epoch p50 ms", "epoch p99 ms", "stage overhead ms (mean)", "commit ms (mean)",
                         "SSTs per batch"],
                        [(r, _num(v.get("p50"), 1), _num(v.get("p99"), 1),
                          _num(spark.get(r, {}).get("stage_overhead_ms_mean"), 1) or "-",
                          _num(spark.get(r, {}).get("commit_ms_mean"), 1) or "-",
                          _num(spark.get(r, {}).get("ssts_per_batch_mean"), 1) or "-") for r, v in lat.items()])
    chart = {"title": f"Nexmark events/s, Spark runtime vs in-process ({obj.get('events', 0):,}-event batches)",
             "labels": names, "series": {r: [rates[r].get(q, 0) for q in names] for r in runtimes}, "log": True}
    return lines, chart


def batch_section(data) -> tuple:
    obj = data.get("batch")
    if obj is None or not obj.get("results"):
        return [], None
    rows = obj["results"]
    lines = ["## Batch queries: Hummock SQL vs DuckDB over Parquet", "",
             f"{obj.get('rows', 0):,}-row `orders` (and 100k `customers`) after `compact_all`; DuckDB reads the same "
             "rows from Parquet in the same run (`python -m bench.batch`); median ms, ratio = DuckDB ms / Hummock ms; "
             f"answers **{'all equal' if obj.get('checked') else 'NOT all equal'}**.", ""]
    lines += _table(["query", "hummock ms", "duckdb ms", "ratio"],
                    [(r["query"], _num(r["hummock_ms"], 1), _num(r.get("duckdb_ms"), 1) or "-",
                      _num(r.get("ratio"), 2) or "-") for r in rows])
    both = [r for r in rows if r.get("duckdb_ms")]
    chart = {"title": f"Batch queries, ms at {obj.get('rows', 0):,} rows (log scale)",
             "labels": [r["query"] for r in both],
             "series": {"hummock": [r["hummock_ms"] for r in both], "duckdb": [r["duckdb_ms"] for r in both]},
             "log": True}
    return lines, chart


SECTIONS = (("kv", kv_section), ("compaction", compaction_section), ("nexmark", nexmark_section),
            ("spark-stream", spark_stream_section), ("batch", batch_section))


def draw(chart: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, series = chart["labels"], chart["series"]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 0.9), 3.6))
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width, label=name)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels, rotation=20)
    if chart["log"]:
        ax.set_yscale("log")
    ax.set_title(chart["title"])
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


def draw_svg(chart: dict, path: pathlib.Path) -> None:
    """The same grouped bar chart as :func:`draw`, as a small hand-written SVG (no matplotlib)."""
    import math
    from xml.sax.saxutils import escape
    labels, series = chart["labels"], chart["series"]
    values = [v for vs in series.values() for v in vs if v]
    top = max(values, default=1)
    log = chart["log"] and values
    low = 10 ** math.floor(math.log10(min(values))) if log else 0
    high = 10 ** math.ceil(math.log10(top)) if log else top * 1.1

    def scale(v):
        if not v:
            return 0.0
        return (math.log10(v) - math.log10(low)) / (math.log10(high) - math.log10(low)) if log else v / high

    left, width, height, plot_h = 70, max(480, 70 * len(labels)), 300, 200
    group = (width - left - 10) / max(len(labels), 1)
    bar = group * 0.8 / max(len(series), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="11"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">{escape(chart["title"])}</text>']
    base = 30 + plot_h
    ticks = [low * 10 ** k for k in range(round(math.log10(high / low)) + 1)] if log else [high * k / 4 for k in range(5)]
    for t in ticks:
        y = base - scale(t) * plot_h if t else base
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{t:,.0f}</text>')
    for i, label in enumerate(labels):
        x0 = left + i * group + group * 0.1
        for k, (name, vs) in enumerate(series.items()):
            h = scale(vs[i]) * plot_h
            parts.append(f'<rect x="{x0 + k * bar:.1f}" y="{base - h:.1f}" width="{bar - 1:.1f}" height="{h:.1f}" '
                         f'fill="{_COLORS[k % len(_COLORS)]}"><title>{escape(name)}: {vs[i]:,.0f}</title></rect>')
        parts.append(f'<text x="{x0 + group * 0.4:.1f}" y="{base + 14}" text-anchor="middle">{escape(str(label))}</text>')
    for k, name in enumerate(series):
        x = left + k * 150
        parts.append(f'<rect x="{x}" y="{height - 22}" width="10" height="10" fill="{_COLORS[k % len(_COLORS)]}"/>'
                     f'<text x="{x + 14}" y="{height - 13}">{escape(name)}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts), encoding="utf-8")


def render(data: dict, out: pathlib.Path, sources=(), note: str = "") -> list:
    """Write the report for ``data`` (bench kind -> JSON object) to ``out`` and its charts beside
    it; returns the chart paths written."""
    try:
        import matplotlib  # noqa: F401
        charts_ok = True
    except ImportError:
        charts_ok = False
    machine = next((o["machine"] for o in data.values() if isinstance(o.get("machine"), dict)), {})
    lines = ["# Hummock benchmark report", "",
             f"Generated {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by `python -m bench.report`"
             f"; machine: {', '.join(f'{k} {v}' for k, v in sorted(machine.items()) if not isinstance(v, dict)) or 'unknown'}.", ""]
    if note:
        lines += [note, ""]
    if sources:
        lines += ["Sources: " + "; ".join(f"`{s}`" for s in sources), ""]
    if not charts_ok:
        lines += ["(Charts are SVG: matplotlib is not installed; `pip install -e '.[report]'` for PNGs.)", ""]
    written = []
    for name, section in SECTIONS:
        body, chart = section(data)
        if not body:
            continue
        lines += body + [""]
        if chart is not None:
            image = out.parent / f"report-{name}.{'png' if charts_ok else 'svg'}"
            (draw if charts_ok else draw_svg)(chart, image)
            written.append(image)
            lines += [f"![{chart['title']}]({image.name})", ""]
    out.write_text("\n".join(lines), encoding="utf-8")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs="*", default=None, choices=sorted(QUICK_ARGS), metavar="NAME",
                        help="workloads to run quickly (default: all of kv, compaction, nexmark unless --from)")
    parser.add_argument("--from", dest="files", nargs="+", default=[], metavar="FILE",
                        help="read JSON lines from these files (a saved benchmark output)")
    parser.add_argument("--out", default=str(HERE / "report.md"), help="the report (default bench/report.md)")
    parser.add_argument("--note", default="", help="a paragraph under the title (conditions of the runs)")
    args = parser.parse_args(argv)
    lines, sources = [], []
    for name in args.files:
        lines += json_lines(pathlib.Path(name).read_text(encoding="utf-8"))
        sources.append(name)
    for name in (args.run if args.run is not None else ([] if args.files else sorted(QUICK_ARGS))):
        found, cmd = run_workload(name)
        lines += found
        sources.append(cmd)
    data = collect(lines)
    if not data:
        print("bench.report: no benchmark JSON lines found", file=sys.stderr)
        return 1
    out = pathlib.Path(args.out)
    charts = render(data, out, sources, args.note)
    print(f"wrote {out} ({', '.join(sorted(data))}) and {len(charts)} chart(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
