"""`python -m bench [SCENARIO...] [--scale full|small|tiny] [--runs N] ...`: run the
scenarios (all by default), print the table, write results to bench/results/."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import readme, report
from bench.cluster import SESSION_TIMEOUT_MS, TICK_MS
from bench.core import SERVERS, Context
from bench.progress import Progress
from bench.runner import run_scenarios
from bench.scale import SCALES
from bench.scenarios import SCENARIOS, by_name
from bench.systems import REPO
from bench.targets import evaluate


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="scenarios to run: " + ", ".join(s.name for s in SCENARIOS)
                        + " (default: all)")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full",
                        help="volumes (default: full, the issue's volumes where they fit)")
    parser.add_argument("--runs", type=int, default=None,
                        help="runs per figure (default: 3; 1 at --scale tiny)")
    parser.add_argument("--systems", default=",".join(SERVERS),
                        help="servers to run (default: %(default)s)")
    parser.add_argument("--cases", default="",
                        help="run only the cases whose 'variant [system]' label contains one "
                        "of these comma-separated words, e.g. 'consumer' or "
                        "'consumer 100 B [logbus]' (default: every case)")
    parser.add_argument("--event-loop", choices=["uvloop", "asyncio"], default="uvloop",
                        help="the logbus broker's event loop (default: uvloop)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results",
                        help="directory for the results (default: bench/results)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where servers keep their data (default: a temp dir, removed)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--no-progress", action="store_true", help="plain log lines only")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy the logbus broker during the last run of each case; "
                        "summaries go to <out>/profiles/")
    parser.add_argument("--zookeeper-tick-ms", type=int, default=TICK_MS,
                        help="tickTime of the cluster scenarios' ZooKeeper (default: "
                        "%(default)s, as `logbus cluster up`); sessions expire on its "
                        "boundaries, which F1 measures")
    parser.add_argument("--update-readme", action="store_true",
                        help="put the table into README.md and bench/README.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        scenarios = [by_name(n) for n in args.scenarios] if args.scenarios else SCENARIOS
    except KeyError as exc:
        print(f"bench: {exc.args[0]}", file=sys.stderr)
        return 2
    systems = {s.strip() for s in args.systems.split(",") if s.strip()}
    unknown = systems - set(SERVERS)
    if unknown:
        print(f"bench: unknown systems {sorted(unknown)} (known: {SERVERS})", file=sys.stderr)
        return 2
    scale = SCALES[args.scale]
    runs = args.runs if args.runs is not None else scale.runs
    if runs < 1:
        print("bench: --runs must be at least 1", file=sys.stderr)
        return 2
    if not 1 <= args.zookeeper_tick_ms <= SESSION_TIMEOUT_MS // 2:
        # ZooKeeper refuses sessions shorter than two ticks
        print(f"bench: --zookeeper-tick-ms must be 1..{SESSION_TIMEOUT_MS // 2}",
              file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="logbus-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(workdir).free
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "scale": scale.name,
        "runs": runs,
        "event_loop": args.event_loop,
        "zookeeper_tick_ms": args.zookeeper_tick_ms,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_before": _load(),
                    "disk_free_gb": round(free / 1e9, 1)},
    }
    start = time.monotonic()
    with Progress(live=False if args.no_progress else None) as progress:
        progress.note(f"bench: scale {scale.name}, {runs} runs, data in {workdir} "
                      f"({free / 1e9:.0f} GB free)")
        ctx = Context(scale, runs, workdir, progress, systems, args.event_loop,
                      profile_dir=args.out.resolve() / "profiles" if args.profile else None,
                      case_filter=[w.strip().lower() for w in args.cases.split(",")
                                   if w.strip()],
                      zookeeper_tick_ms=args.zookeeper_tick_ms)
        try:
            results = run_scenarios(ctx, scenarios)
        finally:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
    meta["duration_s"] = round(time.monotonic() - start, 1)
    meta["machine"]["load_after"] = _load()  # type: ignore[index]
    data = report.to_json(results, evaluate(results), meta)
    written = report.write_all(data, args.out.resolve(), plots=not args.no_plots)
    table = report.markdown(data)
    print(table)
    if args.update_readme:
        # The top-level README shows each scenario's newest recorded run (this one among
        # them), so a partial run does not drop the figures of the scenarios it skipped.
        if readme.main([]) == 0:
            print("updated README.md", file=sys.stderr)
        if report.update_readme(REPO / "bench" / "README.md", table, written):
            print("updated bench/README.md", file=sys.stderr)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 1 if any(c.status == "failed" for r in results for c in r.cases) else 0
