"""`logbus groups` and `logbus consume --group` as subprocesses against a real broker."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from datetime import datetime
from typing import Any

from cli_runs import CLI, failed, ok, run_cli

# A short session so that a rebalance is noticed within a heartbeat of two seconds.
FAST_SESSION = ["--consumer-property", "session.timeout.ms=6000"]
LONG_SESSION = ["--consumer-property", "session.timeout.ms=45000"]


def logbus(broker: Any, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--bootstrap-server", broker.bootstrap, stdin=stdin)


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(broker: Any, partitions: int, per_partition: int) -> str:
    topic = new_name("t")
    ok(logbus(broker, "topics", "create", topic, "--partitions", str(partitions)))
    for p in range(partitions if per_partition else 0):
        produce(broker, topic, p, [f"p{p}-{i}" for i in range(per_partition)])
    return topic


def produce(broker: Any, topic: str, partition: int, values: list[str]) -> None:
    lines = "".join(v + "\n" for v in values).encode()
    ok(logbus(broker, "produce", topic, "--partition", str(partition), stdin=lines))


def consume_group(broker: Any, topic: str, group: str, *extra: str) -> list[str]:
    return ok(logbus(broker, "consume", topic, "--group", group, *FAST_SESSION, *extra)).split()


def table(text: str) -> list[dict[str, str]]:
    """Rows of a column-aligned table (cells have no spaces) keyed by the header."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = lines[0]
    return [dict(zip(header, line, strict=True)) for line in lines[1:]]


def offsets(broker: Any, group: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) from `groups describe`."""
    rows = table(ok(logbus(broker, "groups", "describe", group)))
    return {
        int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows
    }


def plan(text: str) -> dict[int, int]:
    return {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in table(text)}


def test_list_describe_lag_and_delete(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 1, 10)
    group = new_name("g")
    got = consume_group(fast_broker, topic, group, "--from-beginning", "--max-messages", "4")
    assert got == [f"p0-{i}" for i in range(4)]

    assert group in ok(logbus(fast_broker, "groups", "list")).split()
    states = table(ok(logbus(fast_broker, "groups", "list", "--state")))
    assert {"GROUP": group, "STATE": "Empty"} in states
    assert group not in ok(logbus(fast_broker, "groups", "list", "--state", "Stable"))

    described = logbus(fast_broker, "groups", "describe", group)
    assert f"Consumer group '{group}' has no active members." in described.stderr
    header = described.stdout.splitlines()[0].split()
    assert header == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    row = table(described.stdout)[0]
    assert (row["GROUP"], row["TOPIC"], row["CONSUMER-ID"]) == (group, topic, "-")
    assert offsets(fast_broker, group) == {0: ("4", "10", "6")}
    produce(fast_broker, topic, 0, ["late-1", "late-2"])
    assert offsets(fast_broker, group) == {0: ("4", "12", "8")}

    assert "was successful" in ok(logbus(fast_broker, "groups", "delete", group))
    assert group not in ok(logbus(fast_broker, "groups", "list")).split()
    assert failed(logbus(fast_broker, "groups", "describe", group)) == (
        f"logbus: error: Consumer group '{group}' does not exist."
    )
    assert failed(logbus(fast_broker, "groups", "delete", group)) == (
        f"logbus: error: Consumer group '{group}' does not exist."
    )


def test_reset_offsets_dry_run_and_execute(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 2, 10)
    time.sleep(0.05)
    middle = datetime.now().strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]  # local time, ms
    time.sleep(0.05)
    produce(fast_broker, topic, 0, [f"p0-{i}" for i in range(10, 15)])
    group = new_name("g")
    everything = consume_group(fast_broker, topic, group, "--from-beginning", "--max-messages=25")
    assert len(everything) == 25
    assert offsets(fast_broker, group) == {0: ("15", "15", "0"), 1: ("10", "10", "0")}

    def reset(*args: str) -> subprocess.CompletedProcess[str]:
        return logbus(fast_broker, "groups", "reset-offsets", group, *args)

    dry = reset("--topic", topic, "--to-earliest")
    assert "--execute" in dry.stderr  # no action without --execute
    assert plan(dry.stdout) == {0: 0, 1: 0}
    assert plan(ok(reset("--all-topics", "--to-earliest", "--dry-run"))) == {0: 0, 1: 0}
    assert offsets(fast_broker, group)[0][0] == "15"  # a plan changes nothing

    assert plan(ok(reset("--all-topics", "--to-earliest", "--execute"))) == {0: 0, 1: 0}
    assert offsets(fast_broker, group) == {0: ("0", "15", "15"), 1: ("0", "10", "10")}

    assert plan(ok(reset("--topic", f"{topic}:1", "--to-offset", "7", "--execute"))) == {1: 7}
    assert plan(ok(reset("--topic", topic, "--to-offset", "99", "--dry-run"))) == {0: 15, 1: 10}
    assert plan(ok(reset("--all-topics", "--shift-by", "-3", "--execute"))) == {0: 0, 1: 4}
    assert plan(ok(reset("--all-topics", "--shift-by", "2", "--dry-run"))) == {0: 2, 1: 6}
    assert offsets(fast_broker, group) == {0: ("0", "15", "15"), 1: ("4", "10", "6")}

    assert plan(ok(reset("--topic", f"{topic}:0", "--to-datetime", middle))) == {0: 10}
    old = "2000-01-01T00:00:00.000Z"
    assert plan(ok(reset("--all-topics", "--to-datetime", old))) == {0: 0, 1: 0}
    future = "2100-01-01T00:00:00.000+02:00"
    assert plan(ok(reset("--all-topics", "--to-datetime", future))) == {0: 15, 1: 10}

    assert plan(ok(reset("--topic", f"{topic}:0,1", "--to-latest", "--execute"))) == {0: 15, 1: 10}
    assert offsets(fast_broker, group) == {0: ("15", "15", "0"), 1: ("10", "10", "0")}
    assert "no partition 5" in failed(reset("--topic", f"{topic}:5", "--to-latest"))


def test_active_group_refuses_reset_and_delete(fast_broker: Any) -> None:
    from confluent_kafka import Consumer

    topic = make_topic(fast_broker, 1, 3)
    group = new_name("g")
    consumer = Consumer(
        {
            "bootstrap.servers": fast_broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        refused = failed(
            logbus(fast_broker, "groups", "reset-offsets", group, "--all-topics",
                   "--to-earliest", "--execute")
        )  # fmt: skip
        assert refused == (
            f"logbus: error: Assignments can only be reset if the group '{group}' is inactive, "
            "but the current state is Stable."
        )
        assert "not empty" in failed(logbus(fast_broker, "groups", "delete", group))
        members = table(ok(logbus(fast_broker, "groups", "describe", group, "--members")))
        assert [m["#PARTITIONS"] for m in members] == ["1"]
        # a classic group has no epochs nor target assignment: `-`, as kafka-consumer-groups
        (member,) = table(ok(logbus(fast_broker, "groups", "describe", group, "--members",
                                    "--verbose")))
        assert (member["CURRENT-EPOCH"], member["TARGET-EPOCH"]) == ("-", "-")
        assert (member["CURRENT-ASSIGNMENT"], member["TARGET-ASSIGNMENT"]) == (f"{topic}:0", "-")
        state = table(ok(logbus(fast_broker, "groups", "describe", group, "--state")))
        assert state[0]["STATE"] == "Stable"
    finally:
        consumer.close()
    ok(logbus(fast_broker, "groups", "reset-offsets", group, "--topic", topic, "--to-offset",
              "1", "--execute"))  # fmt: skip
    assert offsets(fast_broker, group) == {0: ("1", "3", "2")}


def test_two_group_consumers_share_the_records(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 4, 0)
    group = new_name("g")
    # --from-beginning: a member that looks up its start after the records are written
    # would otherwise start at the end (auto.offset.reset=latest) and miss them.
    # A long session: a member starved of CPU for a few seconds on a loaded machine is
    # dropped and its partitions re-read by the other (Kafka's at-least-once), which is
    # not what this test is about. Members leave with LeaveGroup, so it costs no time.
    args = [*CLI, "consume", topic, "--group", group, *LONG_SESSION, "--max-messages", "20",
            "--from-beginning", "--timeout-ms", "90000",
            "--bootstrap-server", fast_broker.bootstrap]  # fmt: skip
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 90  # bounds a hang; each describe is a CLI run
        while True:  # until both members hold two partitions each
            members = logbus(fast_broker, "groups", "describe", group, "--members").stdout
            if sorted(r["#PARTITIONS"] for r in table(members or "-")) == ["2", "2"]:
                break
            assert time.monotonic() < deadline, members
            time.sleep(0.3)
        for p in range(4):
            produce(fast_broker, topic, p, [f"p{p}-{i}" for i in range(10)])
        # each member stops at its 20 records; the idle timeout above only ends a member
        # that would wait forever, and must outlast the four produce runs on a busy machine
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    received = [out.split() for out, _ in outputs]
    assert [len(values) for values in received] == [20, 20]
    # Each member printed all of its two partitions, and no one else's.
    owned = [sorted({value.split("-")[0] for value in values}) for values in received]
    assert sorted(owned[0] + owned[1]) == ["p0", "p1", "p2", "p3"]
    assert offsets(fast_broker, group) == dict.fromkeys(range(4), ("10", "10", "0"))


def test_group_consumer_resumes_from_its_commit(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 1, 10)
    group = new_name("g")
    first = consume_group(fast_broker, topic, group, "--from-beginning", "--max-messages", "4")
    assert first == [f"p0-{i}" for i in range(4)]
    second = consume_group(fast_broker, topic, group, "--max-messages", "6")
    assert second == [f"p0-{i}" for i in range(4, 10)]
    produce(fast_broker, topic, 0, ["new"])
    assert consume_group(fast_broker, topic, group, "--timeout-ms", "1500") == ["new"]
    # Without a commit and without --from-beginning a group starts at the end.
    assert consume_group(fast_broker, topic, new_name("g"), "--timeout-ms", "1000") == []


def test_range_assignor_matches_kafka() -> None:
    from logbus.client.consumer.assignors import range_assign

    subscriptions = {"c": ["t", "u"], "a": ["t"], "b": ["t", "u"]}
    assert range_assign(subscriptions, {"t": 7, "u": 1}) == {
        "a": {"t": [0, 1, 2]},
        "b": {"t": [3, 4], "u": [0]},
        "c": {"t": [5, 6]},
    }
    assert range_assign({"x": ["t"], "y": ["t"], "z": ["t"]}, {"t": 2}) == {
        "x": {"t": [0]},
        "y": {"t": [1]},
        "z": {},
    }


def test_bad_group_arguments(fast_broker: Any) -> None:
    def usage(*args: str) -> str:
        result = logbus(fast_broker, *args)
        assert result.returncode == 2, result
        return result.stderr

    assert "--group" in usage("consume", "t", "--group", "g", "--partition", "0")
    assert "unknown consumer property" in usage(
        "consume", "t", "--group", "g", "--consumer-property", "bogus=1"
    )
    assert "needs --group" in usage("consume", "t", "--consumer-property", "session.timeout.ms=1")
    assert "YYYY-MM-DD" in usage(
        "groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "yesterday"
    )
    assert "--to-latest" in usage("groups", "reset-offsets", "g", "--all-topics")
    assert "unknown group state" in failed(logbus(fast_broker, "groups", "list", "--state", "Ok"))


def test_terminated_group_consumer_commits_and_leaves(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 1, 5)
    group = new_name("g")
    proc = subprocess.Popen(
        [*CLI, "consume", topic, "--group", group, "--from-beginning", *FAST_SESSION,
         "--bootstrap-server", fast_broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert [proc.stdout.readline() for _ in range(5)] == [f"p0-{i}\n" for i in range(5)]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "Processed a total of 5 messages" in err
    described = logbus(fast_broker, "groups", "describe", group)
    assert "has no active members" in described.stderr  # it left at once
    assert offsets(fast_broker, group) == {0: ("5", "5", "0")}


def commit(broker: Any, group: str, topic: str, offset: int) -> None:
    """Give a new (or inactive) group a committed offset on every partition of `topic`."""
    ok(logbus(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-offset",
              str(offset), "--execute"))  # fmt: skip


def tables(text: str) -> list[list[dict[str, str]]]:
    """Several tables separated by blank lines, as `describe` prints several groups."""
    return [table(block) for block in text.split("\n\n") if block.strip()]


def test_describe_and_delete_several_groups(fast_broker: Any) -> None:
    topic = make_topic(fast_broker, 1, 5)
    first, second = new_name("g"), new_name("g")
    commit(fast_broker, first, topic, 2)
    commit(fast_broker, second, topic, 3)

    both = logbus(fast_broker, "groups", "describe", first, second)
    described = tables(ok(both))
    assert [[(r["GROUP"], r["CURRENT-OFFSET"], r["LAG"]) for r in t] for t in described] == [
        [(first, "2", "3")],
        [(second, "3", "2")],
    ]
    assert both.stderr.count("has no active members") == 2

    every = tables(ok(logbus(fast_broker, "groups", "describe", "--all-groups")))
    assert {first, second} <= {t[0]["GROUP"] for t in every}
    states = tables(ok(logbus(fast_broker, "groups", "describe", first, second, "--state")))
    assert [(t[0]["GROUP"], t[0]["STATE"], t[0]["#MEMBERS"]) for t in states] == [
        (first, "Empty", "0"),
        (second, "Empty", "0"),
    ]

    ghost = new_name("ghost")
    partly = logbus(fast_broker, "groups", "describe", first, ghost)
    assert partly.returncode == 1
    assert [r["GROUP"] for r in table(partly.stdout)] == [first]
    assert f"logbus: error: Consumer group '{ghost}' does not exist." in partly.stderr

    for args in ([], [first, "--all-groups"]):
        usage = logbus(fast_broker, "groups", "describe", *args)
        assert usage.returncode == 2 and "--all-groups" in usage.stderr

    deleted = ok(logbus(fast_broker, "groups", "delete", first, second))
    assert deleted == (
        f"Deletion of requested consumer groups ('{first}', '{second}') was successful.\n"
    )
    assert not {first, second} & set(ok(logbus(fast_broker, "groups", "list")).split())
    assert failed(logbus(fast_broker, "groups", "delete", second)) == (
        f"logbus: error: Consumer group '{second}' does not exist."
    )


def test_reset_to_current_by_duration_and_from_file(fast_broker: Any, tmp_path: Any) -> None:
    topic = make_topic(fast_broker, 2, 10)
    other = make_topic(fast_broker, 1, 4)
    group = new_name("g")
    commit(fast_broker, group, topic, 3)

    def reset(*args: str) -> subprocess.CompletedProcess[str]:
        return logbus(fast_broker, "groups", "reset-offsets", group, *args)

    assert plan(ok(reset("--all-topics", "--to-current"))) == {0: 3, 1: 3}
    # A partition without a committed offset goes to the log end, as in Kafka.
    assert plan(ok(reset("--topic", other, "--to-current"))) == {0: 4}

    assert plan(ok(reset("--all-topics", "--by-duration", "P1D"))) == {0: 0, 1: 0}
    assert plan(ok(reset("--all-topics", "--by-duration", "PT0S"))) == {0: 10, 1: 10}
    assert offsets(fast_broker, group) == {0: ("3", "10", "7"), 1: ("3", "10", "7")}
    assert plan(ok(reset("--topic", f"{topic}:1", "--by-duration", "P1DT0.5S", "--execute"))) == {
        1: 0
    }
    assert offsets(fast_broker, group)[1] == ("0", "10", "10")

    csv_file = tmp_path / "plan.csv"
    csv_file.write_text(f"{topic},0,5\n{topic},1,99\n\n")
    assert plan(ok(reset("--from-file", str(csv_file), "--execute"))) == {0: 5, 1: 10}
    assert offsets(fast_broker, group) == {0: ("5", "10", "5"), 1: ("10", "10", "0")}
    # The four-column form (GROUP,TOPIC,PARTITION,OFFSET) keeps this group's lines only.
    csv_file.write_text(f"{group},{topic},1,7\nsomeone-else,{topic},0,1\n")
    assert plan(ok(reset("--from-file", str(csv_file)))) == {1: 7}

    csv_file.write_text(f"{topic},zero,5\n")
    assert f"{csv_file}:1: expected TOPIC,PARTITION,OFFSET" in failed(
        reset("--from-file", str(csv_file))
    )
    csv_file.write_text(f"{topic},7,5\n")
    assert "no partition 7" in failed(reset("--from-file", str(csv_file)))
    assert "cannot read" in failed(reset("--from-file", str(tmp_path / "missing.csv")))

    for args in (["--all-topics", "--from-file", str(csv_file)], ["--to-current"]):
        assert reset(*args).returncode == 2
    bad = reset("--all-topics", "--by-duration", "1h")
    assert bad.returncode == 2 and "ISO-8601" in bad.stderr
