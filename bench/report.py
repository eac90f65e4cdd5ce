"""Writes a bench run's results: `<date>-<commit>.json`, a Markdown table (`.md`) and PNG
plots (`-throughput.png`, `-latency.png`, `-growth.png` for S1) in bench/results/, and
optionally the table into the READMEs between `<!-- bench:start -->` and `<!-- bench:end -->`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.core import CaseResult
from bench.runner import ScenarioResult
from bench.targets import Target

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def to_json(results: list[ScenarioResult], targets: list[Target],
            meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "scenarios": [
            {
                "name": r.scenario.name,
                "title": r.scenario.title,
                "description": r.scenario.description,
                "metrics": {m: {"unit": u, "higher_is_better": h}
                            for m, (u, h) in r.scenario.metrics.items()},
                "cases": [_case_json(c) for c in r.cases],
            }
            for r in results
        ],
        "targets": [t.as_dict() for t in targets],
    }


def _case_json(case: CaseResult) -> dict[str, Any]:
    return {
        "variant": case.variant,
        "system": case.system,
        "status": case.status,
        "reason": case.reason,
        "note": case.note,
        "metrics": {m: {"median": s.median, "min": s.min, "max": s.max, "values": s.values}
                    for m, s in case.metrics.items()},
        **({"profile": case.profile} if case.profile else {}),
    }


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:,.2f}"


def markdown(data: dict[str, Any]) -> str:
    lines = [
        f"Run {data['date']} at commit `{data['commit']}`, scale `{data['scale']}`, "
        f"median of {data['runs']} runs (min-max), {data['machine']['cpus']} CPUs, "
        f"load average {data['machine']['load_before']} before / "
        f"{data['machine']['load_after']} after, {data['duration_s']:.0f} s in all, "
        f"broker event loop `{data['event_loop']}`.",
        "",
    ]
    for scenario in data["scenarios"]:
        metrics = [m for m in scenario["metrics"]
                   if any(m in c["metrics"] for c in scenario["cases"])]
        lines.append(f"**{scenario['name']}: {scenario['title']}** ({scenario['description']})")
        lines.append("")
        units = [scenario["metrics"][m]["unit"] for m in metrics]
        lines.append("| variant | system | " + " | ".join(units) + " | note |")
        lines.append("|" + " --- |" * (len(units) + 3))
        for case in scenario["cases"]:
            if case["status"] != "ok":
                cells = [f"{case['status']}: {case['reason']}"] + [""] * (len(metrics) - 1)
            else:
                cells = [cell(case["metrics"][m]) if m in case["metrics"] else ""
                         for m in metrics]
            lines.append(f"| {case['variant']} | {case['system']} | " + " | ".join(cells)
                         + f" | {case['note']} |")
        lines.append("")
    lines += _targets_markdown(data)
    return "\n".join(lines)


def cell(summary: dict[str, Any]) -> str:
    if summary["min"] == summary["max"]:
        return _fmt(summary["median"])
    return f"{_fmt(summary['median'])} ({_fmt(summary['min'])}-{_fmt(summary['max'])})"


def _targets_markdown(data: dict[str, Any]) -> list[str]:
    if not data["targets"]:
        return []
    lines = ["**Targets** (ratios of medians from this run)", "",
             "| target | ratio | needed | met |", "| --- | --- | --- | --- |"]
    for t in data["targets"]:
        ratio = "n/a" if t["ratio"] is None else f"{t['ratio']:.2f}"
        needed = ("≥ " if t["higher_is_better"] else "≤ ") + f"{t['target']:g}"
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(f"| {t['name']} | {ratio} | {needed} | {met} |")
    lines.append("")
    return lines


def write_plots(data: dict[str, Any], stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    throughput = [s for s in data["scenarios"]
                  if s["name"] in ("CEIL", "P1", "P2", "P3", "C1", "CL")]
    rows = [(f"{s['name']} {c['variant']} [{c['system']}]", c["metrics"]["mb_s"])
            for s in throughput for c in s["cases"] if "mb_s" in c["metrics"]]
    if rows:
        fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.5))
        labels = [r[0] for r in rows][::-1]
        med = [r[1]["median"] for r in rows][::-1]
        err = [[r[1]["median"] - r[1]["min"] for r in rows][::-1],
               [r[1]["max"] - r[1]["median"] for r in rows][::-1]]
        colors = [_color(label) for label in labels]
        ax.barh(labels, med, xerr=err, color=colors, capsize=2)
        ax.set_xscale("log")
        ax.set_xlabel("MB/s (median of runs, bars min-max; log scale)")
        ax.set_title(f"logbus bench {data['date']} {data['commit']}: throughput")
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        path = stem.with_name(stem.name + "-throughput.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    latency = [(s, c) for s in data["scenarios"] if s["name"] in ("L1", "L2", "R1")
               for c in s["cases"] if c["status"] == "ok"]
    if latency:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        percentiles = [("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")]
        width = 0.8 / len(latency)
        for i, (scenario, case) in enumerate(latency):
            xs, ys, lo, hi = [], [], [], []
            for j, (metric, _name) in enumerate(percentiles):
                summary = case["metrics"].get(metric)
                if summary is None:
                    continue
                xs.append(j + i * width)
                ys.append(summary["median"])
                lo.append(summary["median"] - summary["min"])
                hi.append(summary["max"] - summary["median"])
            label = f"{scenario['name']} {case['variant']} [{case['system']}]"
            ax.bar(xs, ys, width, yerr=[lo, hi], label=label, capsize=2)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(percentiles))],
                      [name for _m, name in percentiles])
        ax.set_yscale("log")
        ax.set_ylabel("ms (median of runs, bars min-max; log scale)")
        ax.set_title(f"logbus bench {data['date']} {data['commit']}: latency percentiles")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = stem.with_name(stem.name + "-latency.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    growth = next((s for s in data["scenarios"] if s["name"] == "S1"), None)
    if growth is not None:
        path = _growth_plot(plt, data, growth, stem.with_name(stem.name + "-growth.png"))
        if path is not None:
            written.append(path)
    return written


def _growth_plot(plt: Any, data: dict[str, Any], scenario: dict[str, Any],
                 path: Path) -> Path | None:
    """S1 in three panels: produce MB/s as partitions and connections grow, the hosted
    partitions' restart times against their budgets, and the memory figures."""
    cases = [c for c in scenario["cases"] if c["status"] == "ok"]
    if not cases:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))

    def bars(ax: Any, labels: list[str], summaries: list[dict[str, Any]], color: str) -> None:
        med = [s["median"] for s in summaries]
        err = [[s["median"] - s["min"] for s in summaries],
               [s["max"] - s["median"] for s in summaries]]
        ax.bar(labels, med, yerr=err, color=color, capsize=3)
        ax.tick_params(axis="x", labelsize=7, rotation=12)

    produce = [(c["variant"].removeprefix("1 KiB, "), c["metrics"]["mb_s"])
               for c in cases if "mb_s" in c["metrics"]]
    if produce:
        bars(axes[0], [p[0] for p in produce], [p[1] for p in produce], "#1f77b4")
    axes[0].set_ylabel("MB/s (median, bars min-max)")
    axes[0].set_title("produce, 1 KiB values", fontsize=9)
    hosted = next((c for c in cases if "restart_s" in c["metrics"]), None)
    if hosted is not None:
        m = hosted["metrics"]
        bars(axes[1], ["clean restart", "after kill -9"],
             [m["restart_s"], m["kill_restart_s"]], "#ff7f0e")
        axes[1].scatter(["clean restart", "after kill -9"],
                        [m["restart_budget_s"]["median"], m["kill_restart_budget_s"]["median"]],
                        marker="_", s=900, color="#d62728", label="budget")
        axes[1].legend(fontsize=7)
        axes[1].set_title(f"{hosted['variant']}: start to serving", fontsize=9)
    axes[1].set_ylabel("s")
    memory = []
    for case in cases:
        m = case["metrics"]
        if "serving_rss_mb" in m:
            memory += [("RSS serving, MB", m["serving_rss_mb"]),
                       ("KB per partition", m["kb_per_partition"])]
        if "idle_rss_mb" in m:
            memory += [("KB per idle connection", m["kb_per_connection"]),
                       ("idle CPU, % of a core", m["idle_cpu_pct"])]
    if memory:
        bars(axes[2], [x[0] for x in memory], [x[1] for x in memory], "#2ca02c")
        axes[2].set_yscale("log")
    axes[2].set_title("memory and idle cost (log scale)", fontsize=9)
    fig.suptitle(f"logbus bench {data['date']} {data['commit']}: cost as the work grows")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _color(label: str) -> str:
    for system, color in (("[logbus", "#1f77b4"), ("[redis", "#d62728"), ("[nafka", "#7f7f7f"),
                          ("[machine", "#2ca02c"), ("[confluent", "#ff7f0e"),
                          ("[kafka-python", "#9467bd"), ("[aiokafka", "#8c564b")):
        if system in label:
            return color
    return "#17becf"


def write_all(data: dict[str, Any], out_dir: Path, plots: bool = True) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{data['date']}-{data['commit']}"
    json_path = stem.with_suffix(".json")
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    md_path = stem.with_suffix(".md")
    md_path.write_text(markdown(data) + "\n")
    written = [json_path, md_path]
    if plots:
        written += write_plots(data, stem)
    return written


def update_readme(path: Path, table: str, images: Sequence[Path] = ()) -> bool:
    """Replace the text between the bench markers of `path`; False if it has none."""
    if not path.exists():
        return False
    text = path.read_text()
    if START not in text or END not in text:
        return False
    links = "".join(f"\n![{p.stem}]({p.relative_to(path.parent).as_posix()})"
                    for p in images if p.suffix == ".png" and p.is_relative_to(path.parent))
    block = f"{START}\n{table}{links}\n{END}"
    path.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _m: block, text,
                           flags=re.S))
    return True
