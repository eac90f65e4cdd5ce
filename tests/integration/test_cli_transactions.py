"""`logbus transactions` and `logbus consume --isolation-level` as subprocesses against a
real broker, with a logbus transactional producer holding a transaction open."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

from cli_runs import ok, run_cli

import logbus

TIMEOUT = 30.0


def logbus_cli(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--bootstrap-server", broker.bootstrap)


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def consume(broker: Any, topic: str, isolation: str) -> list[str]:
    out = ok(
        logbus_cli(
            broker, "consume", topic, "--from-beginning", "--isolation-level", isolation,
            "--timeout-ms", "1500",
        )
    )
    return out.split()


def test_list_describe_describe_producers_and_abort_a_hanging_transaction(broker: Any) -> None:
    topic = f"cli-txn-{uuid.uuid4().hex[:8]}"
    txn_id = f"cli-{uuid.uuid4().hex[:8]}"
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
        plain.send_and_wait(topic, b"plain-0")
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id}
    ) as producer:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send(topic, b"committed-1")
        producer.commit_transaction(TIMEOUT)
        producer.begin_transaction()
        producer.send(topic, b"open-3").result(TIMEOUT)  # offset 3, after marker 2

        listed = rows(ok(logbus_cli(broker, "transactions", "list")))
        assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        mine = [r for r in listed[1:] if r[0] == txn_id]
        assert len(mine) == 1 and mine[0][1] == "0" and mine[0][3] == "Ongoing"
        producer_id = mine[0][2]

        described = rows(
            ok(logbus_cli(broker, "transactions", "describe", "--transactional-id", txn_id))
        )
        assert described[0][:5] == [
            "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"
        ]
        assert described[1][1:3] == [txn_id, producer_id]
        assert described[1][4] == "Ongoing" and described[1][-1] == f"{topic}-0"

        producers = rows(
            ok(
                logbus_cli(
                    broker, "transactions", "describe-producers", "--topic", topic,
                    "--partition", "0",
                )
            )
        )
        assert producers[0][0] == "ProducerId"
        ours = [r for r in producers[1:] if r[0] == producer_id]
        assert len(ours) == 1 and ours[0][-1] == "3"  # the open transaction's first offset

        # The open transaction holds read_committed readers at offset 3.
        assert consume(broker, topic, "read_committed") == ["plain-0", "committed-1"]
        assert consume(broker, topic, "read_uncommitted") == [
            "plain-0", "committed-1", "open-3"
        ]

        usage = logbus_cli(
            broker, "transactions", "abort", "--topic", topic, "--partition", "0",
            "--start-offset", "3", "--producer-id", producer_id,
        )
        assert usage.returncode == 2 and "--start-offset" in usage.stderr
        missing = logbus_cli(
            broker, "transactions", "abort", "--topic", topic, "--partition", "0",
            "--start-offset", "1",
        )
        assert missing.returncode == 1 and "no open transaction" in missing.stderr

        ok(
            logbus_cli(
                broker, "transactions", "abort", "--topic", topic, "--partition", "0",
                "--start-offset", "3",
            )
        )
        after = rows(
            ok(
                logbus_cli(
                    broker, "transactions", "describe-producers", "--topic", topic,
                    "--partition", "0",
                )
            )
        )
        assert [r[-1] for r in after[1:] if r[0] == producer_id] == ["None"]
        # Aborted: the last stable offset moves past it, and it is never read committed.
        with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as plain:
            plain.send_and_wait(topic, b"plain-5")
        assert consume(broker, topic, "read_committed") == [
            "plain-0", "committed-1", "plain-5"
        ]


def test_admin_transaction_calls_and_their_errors(broker: Any) -> None:
    from logbus.client.admin import AdminBatchError
    from logbus.protocol import ErrorCode

    topic = f"adm-txn-{uuid.uuid4().hex[:8]}"
    txn_id = f"adm-{uuid.uuid4().hex[:8]}"
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id}
    ) as producer, logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send(topic, b"v").result(TIMEOUT)
        ongoing = admin.list_transactions(states=["Ongoing"])
        assert [t.transactional_id for t in ongoing if t.transactional_id == txn_id] == [txn_id]
        assert all(t.state == "Ongoing" for t in ongoing)
        assert not [t for t in admin.list_transactions(states=["Empty"]) if t.transactional_id
                    == txn_id]
        d = admin.describe_transactions([txn_id])[txn_id]
        assert d.state == "Ongoing" and d.partitions == [logbus.TopicPartition(topic, 0)]
        assert d.start_time_ms > 0 and d.timeout_ms == 60000
        spec = admin.find_hanging_transaction(logbus.TopicPartition(topic, 0), 0)
        assert spec.producer_id == d.producer_id and spec.producer_epoch == d.producer_epoch
        producer.commit_transaction(TIMEOUT)
        d = admin.describe_transactions([txn_id])[txn_id]
        assert d.state in ("PrepareCommit", "CompleteCommit") and d.start_time_ms >= -1
        try:
            admin.describe_transactions(["no-such-id"])
            raise AssertionError("an unknown transactional id was described")
        except AdminBatchError as exc:
            assert exc.errors["no-such-id"].code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    unknown = logbus_cli(broker, "transactions", "describe", "--transactional-id", "no-such-id")
    assert unknown.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr
