"""``python -m bench.report`` renders bench/report.md (and, with matplotlib, PNG charts) from
benchmark JSON lines: a small fixture of each kind, mixed with console noise."""

import importlib.util
import json

from bench import report

FIXTURE = [
    "# N=1000, mode=native",
    json.dumps({"bench": "kv", "machine": {"python": "3.11"}, "results": [
        {"workload": "fillrandom", "hummock_ops_s": 200000.0, "rocksdict_ops_s": 100000.0, "ratio": 2.0},
        {"workload": "readrandom", "hummock_ops_s": 50000.0, "rocksdict_ops_s": 100000.0, "ratio": 0.5}]}),
    "not json {",
    json.dumps({"bench": "compaction_core", "results": [{"runner": "in-process, 1 thread", "input_mb_s": 40.5,
                                                          "keys_s": 900000}]}),
    json.dumps({"bench": "compaction_spark", "results": [{"runner": "spark local[2]", "input_mb_s": 61.0,
                                                           "keys_s": 1200000}]}),
    json.dumps({"bench": "nexmark", "events": 1000, "events_per_s": {"q0": 1000}, "checked": True,
                "unsupported": ["q5"]}),
    json.dumps({"bench": "nexmark", "events": 2000, "events_per_s": {"q0": 59000, "q3": 120000}, "checked": True,
                "unsupported": ["q5", "q6", "q7", "q8"]}),
]


def test_report_renders_every_section_from_json_lines(tmp_path, capsys):
    source = tmp_path / "runs.log"
    source.write_text("\n".join(FIXTURE) + "\n")
    out = tmp_path / "report.md"
    assert report.main(["--from", str(source), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| fillrandom | 200,000 | 100,000 | 2.00 |" in text
    assert "| spark local[2] | 61.0 | 1,200,000 |" in text and "| in-process, 1 thread | 40.5 |" in text
    assert "2,000 events per query" in text and "**all equal**" in text          # the last nexmark line wins
    assert "| q0 | 59,000 | 118,000 | 0.50 |" in text and "| q5 | not supported yet | 5,200 |  |" in text
    assert "| q6 | - | - |  |" not in text and "| q6 | not supported yet | - |  |" in text
    charts = sorted(p.name for p in tmp_path.glob("*.png"))
    if importlib.util.find_spec("matplotlib") is None:
        svgs = sorted(p.name for p in tmp_path.glob("*.svg"))
        assert charts == [] and svgs == ["report-compaction.svg", "report-kv.svg", "report-nexmark.svg"]
        assert "Charts are SVG: matplotlib is not installed" in text and "![Nexmark events/s per query" in text
        import xml.etree.ElementTree as ET
        nexmark = ET.parse(tmp_path / "report-nexmark.svg").getroot()
        bars = [r for r in nexmark.iter("{http://www.w3.org/2000/svg}rect") if r.find("{*}title") is not None]
        heights = {r.find("{*}title").text: float(r.get("height")) for r in bars}
        assert heights["hummock: 120,000"] > heights["hummock: 59,000"] > 0 == heights["hummock: 0"]
        charts = svgs
    else:
        assert charts == ["report-compaction.png", "report-kv.png", "report-nexmark.png"]
        assert all((tmp_path / c).read_bytes().startswith(b"\x89PNG") for c in charts)
        assert "![Nexmark events/s per query" in text
    assert "3 chart(s)" in capsys.readouterr().out


def test_report_without_any_json_fails(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert report.main(["--from", str(empty), "--out", str(tmp_path / "r.md")]) == 1


def test_svg_charts_need_no_matplotlib(tmp_path):
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    for log in (False, True):
        chart = {"title": "t <&>", "labels": ["a", "b", "c"], "log": log,
                 "series": {"x": [10.0, 1000.0, 0], "y": [100.0, 10.0, 5.0]}}
        path = tmp_path / f"c{log}.svg"
        report.draw_svg(chart, path)
        root = ET.parse(path).getroot()
        bars = {r.find(f"{ns}title").text: float(r.get("height")) for r in root.iter(f"{ns}rect")
                if r.find(f"{ns}title") is not None}
        assert len(bars) == 6 and bars["x: 0"] == 0
        assert bars["x: 1,000"] > bars["y: 100"] > bars["x: 10"] > bars["y: 5"] > 0
        if not log:
            assert abs(bars["x: 1,000"] / bars["y: 100"] - 10) < 0.2     # linear (heights rounded to 0.1)
        assert root.find(f"{ns}text").text == "t <&>"
