"""Runs the selected scenarios: every case `runs` times (median, min, max kept), a case
whose system is missing is reported "not available", a case that fails is reported
"failed" with its error, and the run goes on either way."""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass

from bench.core import Case, CaseResult, Context, Metrics, Scenario, Summary
from bench.profile import Profiler, summarize
from bench.systems import Unavailable

log = logging.getLogger("bench")


@dataclass
class ScenarioResult:
    scenario: Scenario
    cases: list[CaseResult]


def run_case(ctx: Context, scenario: Scenario, case: Case) -> CaseResult:
    result = CaseResult(scenario.name, case.variant, case.system, "ok", note=case.note)
    runs: list[Metrics] = []
    label = f"{scenario.name} {case.variant} [{case.system}]"
    try:
        if case.setup is not None:
            case.setup(ctx)
        runs_wanted = case.runs if case.runs is not None else ctx.runs
        for index in range(runs_wanted):
            ctx.progress.note(f"{label} run {index + 1}/{runs_wanted}")
            # the last run: one-time work (creating __consumer_offsets ...) is behind us
            profiled = case.system == "logbus" or case.profile_pid is not None
            if ctx.profile_dir is not None and profiled and index == runs_wanted - 1:
                runs.append(profiled_run(ctx, scenario, case, result))
            else:
                runs.append(case.run(ctx))
    except Unavailable as exc:
        result.status, result.reason = "not available", str(exc)
    except Exception as exc:
        result.status, result.reason = "failed", f"{type(exc).__name__}: {exc}"
        log.debug("%s failed:\n%s", label, traceback.format_exc())
        ctx.progress.note(f"{label} failed: {result.reason}", style="red")
    finally:
        if case.teardown is not None:
            try:
                case.teardown(ctx)
            except Exception as exc:
                ctx.progress.note(f"{label} teardown failed: {exc}")
    if result.status == "ok":
        for metric in runs[0]:
            result.metrics[metric] = Summary.of([run[metric] for run in runs])
        # the first of the scenario's metrics this case has (S1's rows differ)
        head = next((m for m in scenario.metrics if m in result.metrics),
                    next(iter(scenario.metrics)))
        unit = scenario.metrics[head][0]
        median = result.median(head)
        shown = "n/a" if median is None else f"{median:,.2f}"
        ctx.progress.note(f"{label}: {shown} {unit}", style="green")
    else:
        ctx.progress.note(f"{label}: {result.status}: {result.reason}", style="yellow")
    return result


def profiled_run(ctx: Context, scenario: Scenario, case: Case, result: CaseResult) -> Metrics:
    """A run of a logbus case under py-spy; its summary goes to the profile dir."""
    assert ctx.profile_dir is not None
    # the broker is started before py-spy attaches
    pid = case.profile_pid(ctx) if case.profile_pid is not None else ctx.logbus().pid
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{scenario.name}-{case.variant}").strip("-")
    raw = ctx.workdir / "profiles" / f"{slug}.raw"
    with Profiler(pid, raw):
        metrics = case.run(ctx)
    summary = summarize(raw)
    ctx.profile_dir.mkdir(parents=True, exist_ok=True)
    (ctx.profile_dir / f"{slug}.txt").write_text(
        f"py-spy of the logbus broker during {scenario.name} {case.variant}\n\n{summary}")
    result.profile = summary
    return metrics


def _selected(ctx: Context, cases: list[Case]) -> list[Case]:
    """The cases --cases asks for; teardowns of the others move to the last one kept."""
    if not ctx.case_filter:
        return cases
    kept = [c for c in cases
            if any(w in f"{c.variant} [{c.system}]".lower() for w in ctx.case_filter)]
    kept_ids = {id(c) for c in kept}
    dropped = [c.teardown for c in cases if id(c) not in kept_ids and c.teardown is not None]
    if kept and dropped:
        last = kept[-1]
        teardowns = [t for t in (last.teardown, *dropped) if t is not None]

        def teardown(ctx: Context) -> None:
            for t in teardowns:
                t(ctx)

        last.teardown = teardown
    return kept


def run_scenarios(ctx: Context, scenarios: list[Scenario]) -> list[ScenarioResult]:
    results = []
    try:
        for scenario in scenarios:
            cases = _selected(ctx, [c for c in scenario.cases(ctx)
                                    if all(s in ctx.systems_wanted for s in c.servers)])
            results.append(ScenarioResult(scenario, [run_case(ctx, scenario, c)
                                                     for c in cases]))
    finally:
        ctx.stop_all()
    return results
