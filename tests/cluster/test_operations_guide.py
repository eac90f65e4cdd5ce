"""docs/operations.md, followed as a user follows it: every command block of the page, in
the page's order, run through the real `logbus` command (a shell for `sh` blocks, Python
for `python` blocks, a file written for `properties` blocks) against a real
`logbus cluster up --mode zookeeper`, one cluster for the whole walk: a rolling restart,
preferred leaders restored, a broker added and partitions moved to it (throttled), a
replication factor raised 1 -> 3, the broker decommissioned again, a second log dir
added and replicas moved to it, that dir failed and replaced, and a mirror to a second
cluster.

The page marks each block with `<!-- step: NAME -->`; the test runs the blocks by name,
and at the end checks that it ran every block of the page, in order, so the page cannot
gain, lose or reorder a step without this test following. Only the ports change: the
page's (9092-9095, 2181, 9192, 2182, 9500) become free ones, and `logbus cluster up`'s
defaults are written out so that they can. Where the page says to look and wait ("verify
until completed"), the test reruns the block until its output says so (bounded). An
acks=all idempotent confluent-kafka load runs on `orders` from the first step to the
failed disk's replacement; the checker reads it back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from checker import History, check
from command_processes import CommandProcess
from load import ProducerLoad, read_all

import logbus
from ports import free_port, free_port_range

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
STEP = re.compile(
    r"^(?P<indent> *)<!-- step: (?P<name>[a-z0-9-]+) -->\n"
    r"(?P=indent)```(?P<lang>\w+)\n(?P<body>.*?)\n(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
FENCE = re.compile(r"^ *```\w+$", re.MULTILINE)
STORAGE_ERROR = "org.apache.kafka.common.errors.KafkaStorageException"
CLUSTER_UP_DEFAULTS = " --base-port 9092 --zookeeper-port 2181 --metrics-base-port 0 --quiet"


@dataclass(frozen=True)
class Block:
    name: str
    lang: str
    text: str


def page_blocks() -> list[Block]:
    """The page's marked blocks, in order; every fenced block of the page must be marked."""
    page = PAGE.read_text(encoding="utf-8")
    blocks = []
    for m in STEP.finditer(page):
        indent = len(m["indent"])
        text = "\n".join(line[indent:] for line in m["body"].split("\n"))
        blocks.append(Block(m["name"], m["lang"], text))
    assert len(blocks) == len(FENCE.findall(page)), "a code block without <!-- step: -->"
    names = [b.name for b in blocks]
    assert len(set(names)) == len(names), names
    return blocks


class Walk:
    """Runs the page's blocks by name in `cwd`, the page's ports mapped to free ones."""

    def __init__(self, cwd: Path, ports: dict[int, int]) -> None:
        self.cwd = cwd
        self.blocks = {b.name: b for b in page_blocks()}
        self.ran: list[str] = []
        self._ports = re.compile(r"\b(" + "|".join(map(str, ports)) + r")\b")
        self._port_map = ports
        bin_dir = str(Path(sys.executable).parent)
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def text(self, name: str) -> str:
        block = self.blocks[name]
        self.ran.append(name)
        print(f"{time.strftime('%H:%M:%S')} step {name}", flush=True)  # shown on a failure
        text = block.text
        if text.strip() == "logbus cluster up --mode zookeeper":
            text += CLUSTER_UP_DEFAULTS
        return self._ports.sub(lambda m: str(self._port_map[int(m[1])]), text)

    def run(
        self, name: str, until: Callable[[str], bool] | None = None, timeout: float = 120
    ) -> str:
        """Run the block (until `until(stdout)` holds, rerunning it) and return its output."""
        lang = self.blocks[name].lang
        text = self.text(name)
        if lang == "properties":
            path, _, _ = text.partition("\n")
            assert path.startswith("# "), (name, path)
            (self.cwd / path[2:].strip()).write_text(text + "\n", encoding="utf-8")
            return ""
        argv = {"sh": ["sh", "-ec", text], "python": [sys.executable, "-c", text]}[lang]
        deadline = time.monotonic() + timeout
        while True:
            done = subprocess.run(
                argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=timeout, check=False,
            )  # fmt: skip
            if until is None:
                assert done.returncode == 0, (name, done.stdout, done.stderr)
                return done.stdout
            if done.returncode == 0 and until(done.stdout):
                return done.stdout
            assert time.monotonic() < deadline, (name, "not yet", done.stdout, done.stderr)
            time.sleep(1)

    def start(self, name: str) -> CommandProcess:
        """A block that runs until stopped (a terminal of its own)."""
        assert self.blocks[name].lang == "sh"
        return CommandProcess(["sh", "-c", "exec " + self.text(name)], env=self.env, cwd=self.cwd)


def log_dirs(output: str) -> dict[str, Any]:
    """The log dirs of the one broker described: path -> kafka-log-dirs' dir entry."""
    (broker,) = json.loads(output.splitlines()[-1])["brokers"]
    return {d["logDir"]: d for d in broker["logDirs"]}


def preferred_leaders(bootstrap: str, topics: list[str]) -> bool:
    with logbus.Admin(bootstrap_servers=bootstrap) as admin:
        described = admin.describe_topics(topics)
    return all(
        info.leader == info.replicas[0]
        for topic in topics
        for info in described[topic].partitions.values()
    )


def replicas_of(bootstrap: str, topic: str) -> dict[int, list[int]]:
    with logbus.Admin(bootstrap_servers=bootstrap) as admin:
        described = admin.describe_topics([topic])[topic]
    return {p: list(info.replicas) for p, info in described.partitions.items()}


def stopped(process: CommandProcess) -> None:
    """Ctrl-C in the command's terminal: it stops cleanly."""
    process.proc.send_signal(signal.SIGINT)
    status, stderr = process.finish(120)
    assert status == 0, (status, stderr, process.lines[-20:])


def reassignment_done(output: str) -> bool:
    return "still in progress" not in output and "is completed." in output


# About 2 minutes on a quiet machine; each `logbus` command costs a Python start-up, many
# times that on a loaded one.
@pytest.mark.timeout(900)
def test_the_operations_guide_step_by_step(tmp_path: Path) -> None:
    base, target_base = free_port_range(4), free_port_range(1)
    ports = {9092 + i: base + i for i in range(4)}
    ports |= {2181: free_port(), 9192: target_base, 2182: free_port()}
    ports[9500] = free_port()
    walk = Walk(tmp_path, ports)
    bootstrap = ",".join(f"localhost:{base + i}" for i in range(3))
    with ExitStack() as stack:
        source = stack.enter_context(closing(walk.start("cluster-up")))
        source.wait_for_line("Cluster up.")
        walk.run("create-topics")
        history = History()
        load = stack.enter_context(
            ProducerLoad(bootstrap, history, "orders", client="confluent", producers=1,
                         interval=0.01, **{"acks": "all", "enable.idempotence": True})
        )  # fmt: skip
        load.wait_acknowledged(100)
        follow_restarts_and_expansion(walk, source, bootstrap, tmp_path)
        follow_log_dirs(walk, tmp_path)
        load.wait_acknowledged(load.acknowledged() + 100)
        load.stop()
        assert not load.errors
        checked = check(history, read_all(bootstrap, "orders"))
        assert checked.ok, str(checked)
        follow_mirroring(walk, stack)
        assert walk.ran == list(walk.blocks), "the page's blocks, each once and in order"
        stopped(source)


def follow_restarts_and_expansion(
    walk: Walk, source: CommandProcess, bootstrap: str, cwd: Path
) -> None:
    pids = {b: (cwd / "data" / f"broker-{b}.pid").read_text() for b in range(3)}
    walk.run("rolling-restart", timeout=300)
    for b in range(3):
        assert (cwd / "data" / f"broker-{b}.pid").read_text() != pids[b]
        source.wait_for_line(f"broker {b} stopped (status 0) and restarted", 10)
    walk.run("balance-leaders")
    assert preferred_leaders(bootstrap, ["orders", "payments", "events"])

    walk.run("broker-3-properties")
    with closing(walk.start("broker-3-start")) as broker_3:
        empty = walk.run("broker-3-log-dirs", until=lambda out: "broker-3" in out, timeout=90)
        assert [d["partitions"] for d in log_dirs(empty).values()] == [[]]
        walk.run("expand-generate")
        proposal = json.loads((cwd / "expand.json").read_text())
        assert any(3 in p["replicas"] for p in proposal["partitions"])
        assert "Successfully started partition reassignment" in walk.run("expand-execute")
        verified = walk.run("expand-verify", until=reassignment_done)
        assert "Clearing broker-level throttles" in verified
        assert replicas_of(bootstrap, "orders") == {
            p["partition"]: p["replicas"] for p in proposal["partitions"]
        }

        assert "events" in walk.run("increase-describe")
        walk.run("increase-json")
        walk.run("increase-execute")
        walk.run("increase-verify", until=reassignment_done)
        walk.run("increase-min-isr")
        assert replicas_of(bootstrap, "events") == {0: [1, 0, 2], 1: [2, 1, 0], 2: [0, 2, 1]}

        walk.run("decommission-generate")
        walk.run("decommission-execute")
        walk.run("decommission-verify", until=reassignment_done)
        walk.run(
            "decommission-check",
            until=lambda out: [d["partitions"] for d in log_dirs(out).values()] == [[]],
        )
        assert not any(3 in r for r in replicas_of(bootstrap, "orders").values())
        stopped(broker_3)


def follow_log_dirs(walk: Walk, cwd: Path) -> None:
    disk1, disk2 = (str(cwd / "data" / d) for d in ("broker-1", "broker-1-disk2"))
    walk.run("add-log-dir", timeout=180)
    described = walk.run("add-log-dir-describe")
    assert sorted(log_dirs(described)) == [disk1, disk2]
    walk.run("move-replicas")

    def moved(output: str) -> bool:
        dirs = log_dirs(output)
        return bool(dirs[disk2]["partitions"]) and not dirs[disk1]["partitions"] and not any(
            p["isFuture"] for p in dirs[disk2]["partitions"]
        )

    walk.run("move-replicas-watch", until=moved)

    walk.run("fail-disk")

    def offline(output: str) -> bool:
        lines = output.splitlines()  # log-dirs' three lines, then the partitions
        return log_dirs(lines[2])[disk2]["error"] == STORAGE_ERROR and any(
            "orders" in line for line in lines[3:]
        )

    walk.run("failed-disk-describe", until=offline, timeout=60)
    walk.run("replace-disk", timeout=180)
    walk.run("replaced-disk-in-sync", timeout=180)
    assert (Path(disk2) / "meta.properties").is_file()


def follow_mirroring(walk: Walk, stack: ExitStack) -> None:
    target = stack.enter_context(closing(walk.start("target-cluster-up")))
    target.wait_for_line("Cluster up.")
    walk.run("source-properties")
    walk.run("target-properties")
    with closing(walk.start("mirror-run")) as mirror:

        def caught_up(output: str) -> bool:
            lines = output.split()
            half = len(lines) // 2
            return half == 6 and lines[:half] == lines[half:]

        try:
            offsets = walk.run("mirror-check", until=caught_up, timeout=120)
        except AssertionError as exc:
            mirror.close()
            raise AssertionError(f"{exc}; the mirror: {mirror.lines} {mirror.stderr()}") from None
        assert all(not line.endswith(":0") for line in offsets.split())
        stopped(mirror)
    stopped(target)
