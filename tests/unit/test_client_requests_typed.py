"""The request layer is typed by the generated message TypedDicts: mypy --strict rejects a
misspelt field in a body a builder returns, in a response a reader is given, and in a
literal written for either, and a body or a reader sent with another API's key
(`protocol.messages.apis` pairs them); it accepts the same code spelt right. One mypy run
checks a snippet; each line that should fail is marked with the error code mypy must
report there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = '''
from logbus.client.connection import Connection
from logbus.client.requests.cluster import build_describe_cluster
from logbus.client.requests.common import send
from logbus.client.requests.delete_records import build_delete_records, read_delete_records
from logbus.client.requests.find_coordinator import read_find_coordinator
from logbus.client.requests.metadata import build_metadata, read_metadata
from logbus.client.requests.produce import build_produce
from logbus.protocol.messages import apis
from logbus.protocol.messages.delete_records_response import DeleteRecordsResponse
from logbus.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from logbus.types import TopicPartition

TP = TopicPartition("t", 0)

# spelt right: no error
metadata = build_metadata(12, ["t"])
print(metadata["allow_auto_topic_creation"], metadata["topics"])
produce = build_produce(11, {TP: b""})
print(produce["topic_data"][0]["partition_data"][0]["records"])
answer: FindCoordinatorResponse = {"coordinators": [{"key": "g", "node_id": 1}]}
print(read_find_coordinator(answer, 4))
deleted: DeleteRecordsResponse = {
    "topics": [{"name": "t", "partitions": [{"partition_index": 0, "low_watermark": 5}]}]
}
print(read_delete_records(deleted, {TP: 5}), build_delete_records(2, {TP: 5})["timeout_ms"])

# misspelt
print(metadata["allow_auto_topic_creaton"])  # expect: typeddict-item
print(produce["topic_data"][0]["partition_data"][0]["record"])  # expect: typeddict-item
wrong: FindCoordinatorResponse = {"coordinators": [{"nodeid": 1}]}  # expect: typeddict-unknown-key
print(read_find_coordinator({"coordinator": []}, 4))  # expect: typeddict-unknown-key
print(build_delete_records(2, {TP: 5})["timeout"])  # expect: typeddict-item


def low_watermarks(response: DeleteRecordsResponse) -> list[int]:
    partitions = [p for t in response["topics"] for p in t["partitions"]]
    return [p["lowwatermark"] for p in partitions]  # expect: typeddict-item


async def paired(conn: Connection) -> None:
    print(read_metadata(await send(conn, apis.METADATA, build_metadata(12, None), 12)))
    await send(conn, apis.FIND_COORDINATOR, build_metadata(12, None), 12)  # expect: misc
    cluster = await send(conn, apis.DESCRIBE_CLUSTER, build_describe_cluster(1), 1)
    print(read_metadata(cluster))  # expect: arg-type
'''


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[int, set[str]]:
    """Line number -> the error codes mypy --strict (with the project's settings) reports
    on the snippet."""
    folder = tmp_path_factory.mktemp("typed_requests")
    snippet = folder / "snippet.py"
    snippet.write_text(SNIPPET)
    stdout, stderr, _status = api.run(
        [
            "--config-file", str(ROOT / "pyproject.toml"),
            "--strict",
            "--cache-dir", str(folder / "cache"),
            "--no-error-summary",
            "--hide-error-context",
            "--show-error-codes",
            str(snippet),
        ]
    )
    assert not stderr, stderr
    found: dict[int, set[str]] = {}
    for line in stdout.splitlines():
        if ": note: " in line:  # "Did you mean ...?" under an error
            continue
        match = re.match(rf"{re.escape(str(snippet))}:(\d+): error: .*\[([a-z-]+)\]$", line)
        assert match, f"an unexpected mypy line: {line}"
        found.setdefault(int(match[1]), set()).add(match[2])
    return found


def _expected() -> dict[int, set[str]]:
    """What the `# expect:` marks in the snippet ask for."""
    return {
        number: {match[1]}
        for number, text in enumerate(SNIPPET.splitlines(), start=1)
        if (match := re.search(r"# expect: ([a-z-]+)$", text))
    }


@pytest.mark.slow  # a cold mypy run over the client's modules
def test_each_misspelt_field_is_a_mypy_error_and_nothing_else(
    mypy_errors: dict[int, set[str]],
) -> None:
    expected = _expected()
    assert len(expected) == 8
    assert mypy_errors == expected
