"""CEIL: the machine's ceilings the other figures are read against: loopback TCP
throughput (iperf3, one stream) and sequential write throughput to the data disk (1 MiB
writes, then fsync, in the directory the brokers write to)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

from bench.core import Case, Context, Metrics, Scenario
from bench.systems import Unavailable, free_port

CEILING = {"mb_s": ("MB/s", True)}
IPERF_SECONDS = 3


def loopback_run(ctx: Context) -> Metrics:
    iperf = shutil.which("iperf3")
    if iperf is None:
        raise Unavailable("iperf3 is not installed (make bench-deps installs it)")
    port = free_port()
    log = ctx.workdir / f"iperf3-server-{port}.log"
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        server = subprocess.Popen([iperf, "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                                  stdout=out, stderr=out)
    try:
        # not wait_listening: a probe connection would be the one client `-1` serves
        deadline = time.monotonic() + 10
        while b"listening" not in log.read_bytes() and time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"iperf3 -s exited: {log.read_text(errors='replace')}")
            time.sleep(0.05)
        seconds = max(1, min(IPERF_SECONDS, int(ctx.scale.request_seconds)))
        ctx.progress.begin(f"iperf3 loopback for {seconds} s", None)
        result = subprocess.run(
            [iperf, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
            capture_output=True, check=True, timeout=60,
        )
        report = json.loads(result.stdout)
        bits = report["end"]["sum_received"]["bits_per_second"]
        return {"mb_s": bits / 8 / 1e6}
    finally:
        ctx.progress.end()
        try:  # `-1`: the server exits after its one client
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)


def disk_run(ctx: Context) -> Metrics:
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    path = ctx.workdir / "disk-ceiling.bin"
    total = max(ctx.scale.p2_bytes, 8 << 20)
    block = os.urandom(1 << 20)
    ctx.progress.begin(f"sequential write of {total >> 20} MiB + fsync", total >> 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(total >> 20):
            os.write(fd, block)
            ctx.progress.advance(1, 1 << 20)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
        ctx.progress.end()
    return {"mb_s": total / elapsed / 1e6}


def _cases(ctx: Context) -> list[Case]:
    return [
        Case("loopback TCP (iperf3)", "machine", loopback_run, note="one stream"),
        Case("sequential disk write", "machine", disk_run,
             note=f"{max(ctx.scale.p2_bytes, 8 << 20) >> 20} MiB, 1 MiB writes, fsync"),
    ]


CEIL = Scenario("CEIL", "Machine ceilings", _cases, CEILING,
                "what the hardware allows, for reading the other figures")
