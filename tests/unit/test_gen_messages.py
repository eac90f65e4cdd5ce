"""The committed message tables (src/logbus/protocol/messages/) match their generator
(tools/gen_messages.py) run on Kafka's definitions in ../shared/kafka-protocol, the folder CI
clones beside the repository (or where KAFKA_PROTOCOL_DIR points: a git worktree has no
such neighbour); and `--check` reports a table edited by hand, a missing one
and a stale one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "gen_messages.py"
MESSAGES = REPO / "src" / "logbus" / "protocol" / "messages"
PROTO = Path(os.environ.get("KAFKA_PROTOCOL_DIR", REPO.parent / "shared" / "kafka-protocol"))

needs_definitions = pytest.mark.skipif(
    not (PROTO / "message").is_dir(),
    reason=f"Kafka's message definitions are not beside the repository ({PROTO})",
)


def gen_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), str(PROTO), "--check", *args],
        capture_output=True, text=True, timeout=120,
    )


@needs_definitions
def test_the_committed_tables_match_the_generator() -> None:
    result = gen_check()
    assert result.returncode == 0, result.stderr
    assert "matches its generator" in result.stdout


@needs_definitions
def test_check_reports_an_edited_a_missing_and_a_stale_table(tmp_path: Path) -> None:
    copy = tmp_path / "messages"
    shutil.copytree(MESSAGES, copy, ignore=shutil.ignore_patterns("__pycache__"))
    edited = copy / "fetch_request.py"
    edited.write_text(edited.read_text().replace("VALID_VERSIONS = (", "VALID_VERSIONS = (1 + "))
    (copy / "produce_request.py").unlink()
    (copy / "old_request.py").write_text("NAME = 'OldRequest'\n")

    result = gen_check("--out", str(copy))

    assert result.returncode == 1
    assert "does not match its generator (run `make gen`)" in result.stderr
    assert f"differs: {edited}" in result.stderr
    assert "+VALID_VERSIONS = (" in result.stderr  # the start of a diff for the edited one
    assert f"missing: {copy / 'produce_request.py'}" in result.stderr
    assert f"not generated (stale): {copy / 'old_request.py'}" in result.stderr


def test_a_folder_without_definitions_is_a_readable_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path), "--check"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "has no message/ folder" in result.stderr
