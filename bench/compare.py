"""Old commit against new, side by side in one run.

    python -m bench.compare --baseline REV [--rounds 4] [--scale small] [--spark-rows N]
                            [SCENARIO ...]

Checks REV out into a temporary git worktree, then runs the same scenarios (default: P1,
C1, CL) from both trees, round by round, each with its own bench harness and its own
`src/` on PYTHONPATH, so both commits meet the same machine load; each round swaps which
tree goes first (base, head; head, base; ...), so neither always runs second. With
`--spark-rows N` it also runs `bench.spark_bench` (one timed run per round) from both
trees. Each tree's figure is the median of its rounds; the table gives head / base.
Writes `bench/results/compare-<date>-<base>-<head>.json` and `.md`. On this 2-core VM one
run of a figure moves by up to 2x (the same commit against itself: see
`bench/results/compare-2026-11-24-1316a60-1316a60.md`): read ratios with that in mind.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
Key = tuple[str, str, str, str]  # scenario, variant, system, metric


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _run(tree: Path, args: list[str], log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    with log.open("a") as out:
        subprocess.run([sys.executable, *args], cwd=tree, env=env, stdout=out,
                       stderr=subprocess.STDOUT, check=False)


def _build(tree: Path, log: Path) -> None:
    """Build a tree's compiled parts in place (`setup.py`, where it has one), as an
    editable install would: run from PYTHONPATH=src it would otherwise take the slower
    fallbacks."""
    if (tree / "setup.py").exists():
        _run(tree, ["setup.py", "-q", "build_ext", "--inplace"], log)


def _bench_figures(out: Path) -> dict[Key, float]:
    figures: dict[Key, float] = {}
    for path in out.glob("*.json"):
        if path.name.startswith("spark-"):
            for row in json.loads(path.read_text())["results"]:
                figures[("spark", row["name"], row["system"], "rows/s")] = row["rows_per_s"]
            continue
        for scenario in json.loads(path.read_text())["scenarios"]:
            units = {name: spec["unit"] for name, spec in scenario["metrics"].items()}
            for case in scenario["cases"]:
                if case["status"] != "ok":
                    continue
                for name, value in case["metrics"].items():
                    if name in units:
                        key = (scenario["name"], case["variant"], case["system"], units[name])
                        figures[key] = value["median"]
    return figures


def _table(base: str, head: str, rows: dict[Key, dict[str, list[float]]]) -> str:
    lines = [f"| scenario | variant | system | unit | {base} | {head} | {head}/{base} |",
             "| --- | --- | --- | --- | ---: | ---: | ---: |"]
    for key in sorted(rows):
        runs = rows[key]
        old = statistics.median(runs["base"]) if runs.get("base") else None
        new = statistics.median(runs["head"]) if runs.get("head") else None
        ratio = f"{new / old:.2f}" if old and new is not None else "-"
        cells = [f"{x:,.1f}" if x is not None else "-" for x in (old, new)]
        lines.append(f"| {' | '.join(key)} | {' | '.join(cells)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", default=["P1", "C1", "CL"])
    parser.add_argument("--baseline", required=True, help="the old commit (any git revision)")
    parser.add_argument("--rounds", type=int, default=4,
                        help="rounds; each swaps which tree runs first (default: 4)")
    parser.add_argument("--scale", default="small", choices=["full", "small", "tiny"])
    parser.add_argument("--cases", default="", help="passed to the bench (see its --help)")
    parser.add_argument("--spark-rows", type=int, default=0,
                        help="also run bench.spark_bench with this many rows (0: no)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    base = _git("rev-parse", "--short", args.baseline)
    head = _git("rev-parse", "--short", "HEAD")
    rows: dict[Key, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        work = Path(tmp)
        base_tree = work / "base"
        _git("worktree", "add", "--detach", str(base_tree), base)
        try:
            for tree in (base_tree, REPO):
                _build(tree, work / "build.log")
            for round_ in range(args.rounds):
                sides = [("base", base_tree), ("head", REPO)]
                # each round swaps the order: neither tree always runs second
                for side, tree in sides if round_ % 2 == 0 else sides[::-1]:
                    out = work / f"{side}-{round_}"
                    out.mkdir()
                    log = work / f"{side}.log"
                    if args.scenarios:
                        _run(tree, ["-m", "bench", *args.scenarios, "--systems", "logbus",
                                    "--runs", "1", "--scale", args.scale, "--out", str(out),
                                    "--no-plots", "--no-progress",
                                    *(["--cases", args.cases] if args.cases else [])], log)
                    if args.spark_rows:
                        _run(tree, ["-m", "bench.spark_bench", "--rows", str(args.spark_rows),
                                    "--runs", "1", "--out", str(out)], log)
                    for key, value in _bench_figures(out).items():
                        rows.setdefault(key, {}).setdefault(side, []).append(value)
                    print(f"round {round_ + 1}/{args.rounds} {side} ({tree}): "
                          f"{len(_bench_figures(out))} figures", flush=True)
        finally:
            _git("worktree", "remove", "--force", str(base_tree))
    stamp = dt.date.today().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    name = args.out / f"compare-{stamp}-{base}-{head}"
    record: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "base": base, "head": head, "rounds": args.rounds, "scale": args.scale,
        "load_avg_1m": os.getloadavg()[0],
        "figures": [{"scenario": k[0], "variant": k[1], "system": k[2], "unit": k[3],
                     **v} for k, v in sorted(rows.items())],
    }
    name.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    table = _table(base, head, rows)
    header = (f"# {base} against {head}\n\nMedians of {args.rounds} alternating rounds, "
              f"scale {args.scale}, {record['date']}.\n\n")
    name.with_suffix(".md").write_text(header + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
