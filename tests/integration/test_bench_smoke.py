"""The benchmark harness (bench/) end to end at --scale tiny against a real broker, so it
cannot rot unnoticed: it must run, and its JSON must carry the figures the README table and
the plots are made from. No speed is asserted here (speed is bench/'s business)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_bench(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=110)


def test_a_tiny_run_writes_json_and_markdown_with_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = run_bench("C1", "R1", "--scale", "tiny", "--systems", "logbus", "--no-plots",
                       "--no-progress", "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    [md_path] = out.glob("*.md")
    assert json_path.stem == md_path.stem
    data = json.loads(json_path.read_text())
    assert data["scale"] == "tiny" and data["runs"] == 1 and data["event_loop"] == "uvloop"
    assert {"date", "commit", "machine", "duration_s", "targets"} <= data.keys()
    assert data["machine"]["cpus"] >= 1
    assert [s["name"] for s in data["scenarios"]] == ["C1", "R1"]
    c1, r1 = data["scenarios"]
    # --systems logbus: only the logbus rows ran, and they ran to completion
    # (librdkafka, then the logbus columnar consumer)
    assert [(c["system"], c["status"]) for c in c1["cases"]] == [("logbus", "ok")] * 2
    assert [(c["system"], c["status"]) for c in r1["cases"]] == [("logbus", "ok")] * 2
    consume = c1["cases"][0]["metrics"]
    assert {"mb_s", "records_s", "cpu_s_per_gib", "peak_rss_mb"} <= consume.keys()
    # tiny: 8 MiB of 1 KiB values and the warm-up record, all read
    assert consume["records"]["median"] == 8 * 1024 + 1
    for summary in consume.values():
        assert summary["min"] <= summary["median"] <= summary["max"]
        assert len(summary["values"]) == 1
    assert consume["mb_s"]["median"] > 0 and consume["peak_rss_mb"]["median"] > 0
    columnar = c1["cases"][1]["metrics"]
    assert columnar["records"]["median"] == 8 * 1024 + 1 and columnar["mb_s"]["median"] > 0
    requests = r1["cases"][0]["metrics"]
    assert requests["requests_s"]["median"] > 0
    assert 0 < requests["p50_ms"]["median"] <= requests["p99_ms"]["median"]
    # the C1 and R1 targets are listed; their peers did not run, so they are undecided
    names = [t["name"] for t in data["targets"]]
    assert names == ["C1 MB/s >= 2x Redis XRANGE",
                     "R1 requests/s >= 0.5x Redis unpipelined XADD"]
    assert all(t["met"] is None for t in data["targets"])
    table = md_path.read_text()
    assert "| 1 KiB from offset 0 | logbus |" in table
    assert "| 1 KiB from offset 0, logbus columnar consumer | logbus |" in table
    assert "| 100 B, 1 in flight, raw wire | logbus |" in table
    assert "| 100 B, 1 in flight, librdkafka | logbus |" in table


def test_an_unknown_scenario_is_refused_with_the_known_names(tmp_path: Path) -> None:
    result = run_bench("P9", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "unknown scenario 'P9'" in result.stderr
    assert "P1" in result.stderr and "CL" in result.stderr
    assert not list(tmp_path.iterdir())


def test_cases_runs_only_the_matching_rows(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = run_bench("CL", "--scale", "tiny", "--systems", "logbus", "--cases",
                       "consumer 100 B [logbus]", "--no-plots", "--no-progress",
                       "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    [cl] = json.loads(json_path.read_text())["scenarios"]
    assert [(c["variant"], c["system"], c["status"]) for c in cl["cases"]] == [
        ("consumer 100 B", "logbus", "ok")]
    assert cl["cases"][0]["metrics"]["records"]["median"] >= 2_000  # (+1 warm-up record)


def test_cl_cases_run_in_a_fresh_spawned_process_whose_errors_surface(
        monkeypatch: Any) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    import bench_children
    from bench.progress import Progress
    from bench.scenarios.clients import in_subprocess

    monkeypatch.setattr(bench_children, "MARK", "changed by the parent")
    progress = Progress(live=False)
    metrics = in_subprocess(progress, "demo", bench_children.report, 2.5)
    assert metrics["value"] == 2.5
    assert metrics["pid"] != os.getpid()
    assert metrics["inherited"] == 0.0  # spawned: nothing of the parent's state came along
    with pytest.raises(LookupError, match=r"^the child's reason$") as failed:
        in_subprocess(progress, "demo", bench_children.fail, "the child's reason")
    assert "bench_children.py" in str(failed.value.__cause__)  # the child's traceback
    with pytest.raises(RuntimeError, match="the demo subprocess died"):
        in_subprocess(progress, "demo", bench_children.die)


def test_the_cluster_scenarios_run_on_three_brokers_and_zookeeper(tmp_path: Path) -> None:
    """P3, L2 and F1 at --scale tiny: a real ZooKeeper (Debian's package; this fails
    without it, as the cluster tests do) and three `logbus server start` processes."""
    out = tmp_path / "results"
    result = run_bench("P3", "L2", "F1", "--scale", "tiny", "--systems", "logbus",
                       "--no-plots", "--no-progress", "--out", str(out),
                       "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    data = json.loads(json_path.read_text())
    assert [s["name"] for s in data["scenarios"]] == ["P3", "L2", "F1"]
    cases = {s["name"]: s["cases"] for s in data["scenarios"]}
    for name in ("P3", "L2", "F1"):
        assert [(c["system"], c["status"]) for c in cases[name]] == [("logbus x3", "ok")], (
            cases[name])
    produce = cases["P3"][0]["metrics"]
    assert produce["records"]["median"] == 8 * 1024  # tiny: 8 MiB of 1 KiB values
    assert produce["mb_s"]["median"] > 0 and produce["cpu_s_per_gib"]["median"] > 0
    assert produce["min_isr"]["median"] in (2, 3)  # acks=all with min.insync.replicas=2
    latency = cases["L2"][0]["metrics"]
    assert latency["samples"]["median"] > 0
    assert 0 < latency["p50_ms"]["median"] <= latency["p99_ms"]["median"]
    assert latency["cpu_cores"]["median"] > 0  # summed over the three brokers
    failover = cases["F1"][0]["metrics"]
    assert failover["kills"]["median"] == 1  # tiny: one kill, in F1's single run
    assert len(failover["p99_ms"]["values"]) == 1
    assert failover["budget_ms"]["median"] == 7000  # session timeout 6000 + 1 s
    # a produce to the killed leader's partition succeeded on another broker
    assert failover["p50_ms"]["median"] == failover["p99_ms"]["median"] > 0
    assert failover["client_p99_ms"]["median"] > 0
    # ZooKeeper deleted the killed broker's registration (its session expired)
    assert failover["expiry_max_ms"]["median"] > 0
    assert "ZooKeeper tickTime=500" in cases["F1"][0]["note"]
    targets = {t["name"]: t for t in data["targets"]}
    # P1 and L1 did not run: their ratios are undecided; F1's budget is its own row
    assert targets["P3 rf=3 acks=all MB/s >= 0.40x single-broker P1"]["met"] is None
    assert targets["L2 rf=3 acks=all p99 <= 3x single-broker L1 p99"]["met"] is None
    assert targets["F1 p99 failover <= zookeeper.session.timeout.ms + 1 s"]["ratio"] > 0
    table = (out / f"{json_path.stem}.md").read_text()
    assert "| 1 KiB rf=3 acks=all | logbus x3 |" in table
    assert "| kill -9 of a leader | logbus x3 |" in table


def test_without_java_the_cluster_rows_read_not_available(tmp_path: Path) -> None:
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
           "PATH": str(empty_path)}  # no java (nor git: the commit reads "unknown")
    result = subprocess.run(
        [sys.executable, "-m", "bench", "P3", "L2", "F1", "--scale", "tiny", "--no-plots",
         "--no-progress", "--out", str(out), "--workdir", str(tmp_path / "work")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-3000:]  # not available is not a failure
    [json_path] = out.glob("*.json")
    data = json.loads(json_path.read_text())
    rows = [c for s in data["scenarios"] for c in s["cases"]]
    assert [(c["system"], c["status"]) for c in rows] == [("logbus x3", "not available")] * 3
    assert all("no 'java' on PATH" in c["reason"] for c in rows), rows
    assert all(t["met"] is None for t in data["targets"])
    assert "| 1 KiB rf=3 acks=all | logbus x3 | not available: no 'java' on PATH" in (
        out / f"{json_path.stem}.md").read_text()


def test_the_transaction_scenarios_measure_what_they_claim(tmp_path: Path) -> None:
    """TX1 and TX2 at --scale tiny: every TX1 row runs for its time, the transactional ones
    commit at their cadence (every ~1 MB: 976 records a transaction at most) and the
    idempotent ones never; TX2's read_committed reader gets exactly the committed records
    of the log in which one transaction in ten was aborted (10 MiB: 10 transactions of 976
    x 1 KiB), while read_uncommitted gets them all over the same offsets."""
    out = tmp_path / "results"
    result = run_bench("TX1", "TX2", "--scale", "tiny", "--systems", "logbus", "--no-plots",
                       "--no-progress", "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    data = json.loads(json_path.read_text())
    assert [s["name"] for s in data["scenarios"]] == ["TX1", "TX2"]
    tx1, tx2 = ({c["variant"]: c for c in s["cases"]} for s in data["scenarios"])
    assert all(c["status"] == "ok" for c in [*tx1.values(), *tx2.values()]), data
    for client in ("confluent-kafka", "logbus client"):
        idem = tx1[f"1 KiB idempotent, {client}"]["metrics"]
        assert idem["txns_s"]["median"] == 0 and idem["mb_s"]["median"] > 0
        for cadence in ("every 100 ms", "every 10 ms", "every ~1 MB"):
            txn = tx1[f"1 KiB transactional, commit {cadence}, {client}"]["metrics"]
            assert txn["txns_s"]["median"] > 0 and txn["mb_s"]["median"] > 0
            txns = txn["txns_s"]["median"] * txn["seconds"]["median"]
            if cadence == "every ~1 MB":
                assert txn["records"]["median"] <= round(txns) * 976
    committed = tx2["1 KiB read_committed, 10% aborted"]["metrics"]
    uncommitted = tx2["1 KiB read_uncommitted, 10% aborted"]["metrics"]
    # the warm-up record's transaction, then 10 of which the tenth was aborted
    assert committed["delivered"]["median"] == 1 + 9 * 976
    assert uncommitted["delivered"]["median"] == 1 + 10 * 976
    assert committed["mb_s"]["median"] > 0 and uncommitted["mb_s"]["median"] > 0
    targets = {t["name"]: t for t in data["targets"]}
    assert targets["TX2 read_committed MB/s >= 0.9x read_uncommitted (10% aborted)"][
        "ratio"] > 0
    for client in ("confluent-kafka", "logbus client"):
        name = (f"TX1 transactional, commit every 100 ms, MB/s >= 0.95x idempotent "
                f"({client})")
        assert targets[name]["ratio"] > 0


def test_the_defaults_scenario_runs_every_client_with_nothing_set(tmp_path: Path) -> None:
    """D1 at --scale tiny: every producer and consumer row runs to completion (the
    confluent-kafka producer's records are counted in the topic afterwards), and every
    D1 target has its two figures."""
    out = tmp_path / "results"
    result = run_bench("D1", "--scale", "tiny", "--systems", "logbus", "--no-plots",
                       "--no-progress", "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    [d1] = json.loads(json_path.read_text())["scenarios"]
    rows = {(c["variant"], c["system"]): c for c in d1["cases"]}
    assert all(c["status"] == "ok" for c in rows.values()), d1
    assert rows[("producer 1 KiB", "logbus perf produce")]["metrics"]["records"][
        "median"] == 2_000
    assert rows[("producer 100 B", "confluent-kafka")]["metrics"]["records"]["median"] == 4_000
    assert {system for variant, system in rows if variant == "consumer 1 KiB"} == {
        "logbus blocking", "logbus asyncio", "confluent-kafka"}
    targets = [t for t in json.loads(json_path.read_text())["targets"]
               if t["name"].startswith("D1")]
    assert len(targets) == 6 and all(t["ratio"] > 0 for t in targets)


def test_the_security_scenarios_run_over_ssl_and_scram(tmp_path: Path) -> None:
    """TLS and SCRAM at --scale tiny on the broker with PLAINTEXT, SSL and SASL_PLAINTEXT
    listeners (a CA and a certificate made at start-up): P1 and C1 over both listeners
    move every record, the C1 rows read what the P1 PLAINTEXT row wrote, and each SCRAM
    mechanism authenticates (a refused login would fail its row)."""
    out = tmp_path / "results"
    result = run_bench("TLS", "SCRAM", "--scale", "tiny", "--systems", "logbus", "--no-plots",
                       "--no-progress", "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    data = json.loads(json_path.read_text())
    assert [s["name"] for s in data["scenarios"]] == ["TLS", "SCRAM"]
    tls, scram = ({c["variant"]: c for c in s["cases"]} for s in data["scenarios"])
    assert all(c["status"] == "ok" for c in [*tls.values(), *scram.values()]), data
    for protocol in ("PLAINTEXT", "SSL"):
        produced = tls[f"P1 1 KiB {protocol}"]["metrics"]
        assert produced["records"]["median"] == 4 * 1024  # tiny: 4 MiB of 1 KiB values
        consumed = tls[f"C1 1 KiB {protocol}"]["metrics"]
        assert consumed["records"]["median"] == 4 * 1024 + 1  # and the warm-up record
        assert produced["mb_s"]["median"] > 0 and consumed["mb_s"]["median"] > 0
    assert set(scram) == {"SCRAM-SHA-256, 4096 iterations", "SCRAM-SHA-512, 4096 iterations",
                          "PLAINTEXT, no authentication"}
    for row in scram.values():
        metrics = row["metrics"]
        assert metrics["connections_s"]["median"] > 0
        assert 0 < metrics["p50_ms"]["median"] <= metrics["p99_ms"]["median"]
    targets = {t["name"]: t for t in data["targets"]}
    for load in ("P1", "C1"):
        assert targets[f"TLS {load} 1 KiB over SSL >= 0.6x PLAINTEXT"]["ratio"] > 0


def test_s1_produces_over_more_partitions_and_with_idle_connections(tmp_path: Path) -> None:
    """S1's load rows at --scale tiny (6 and 60 partitions, 50 idle connections); the
    hosted partitions' restarts are left to the bench (minutes at full size)."""
    out = tmp_path / "results"
    result = run_bench("S1", "--scale", "tiny", "--systems", "logbus", "--no-plots",
                       "--no-progress", "--cases", "partitions [logbus],connections [logbus]",
                       "--out", str(out), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = out.glob("*.json")
    [s1] = json.loads(json_path.read_text())["scenarios"]
    cases = {c["variant"]: c for c in s1["cases"]}
    assert list(cases) == ["1 KiB, 6 partitions", "1 KiB, 60 partitions",
                           "1 KiB, 6 partitions, 50 idle connections"]
    assert all(c["status"] == "ok" for c in cases.values()), cases
    for case in cases.values():
        assert case["metrics"]["records"]["median"] == 8 * 1024  # tiny: 8 MiB of 1 KiB
    idle = cases["1 KiB, 6 partitions, 50 idle connections"]["metrics"]
    assert idle["idle_cpu_pct"]["median"] >= 0 and idle["kb_per_connection"]["median"] >= 0
    targets = {t["name"]: t for t in json.loads(json_path.read_text())["targets"]}
    # the targets name the full-size rows: at tiny they are undecided
    assert targets["S1 produce over 1,000 partitions >= 0.7x over 6 (same bytes)"]["met"] is None
