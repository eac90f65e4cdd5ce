"""KRaft's settings in the broker config, and `logbus storage` (kafka-storage): random
cluster ids, formatting meta.properties v1 into every directory, refusing formatted ones
unless asked, and describing what is there."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from logbus.cli.main import main
from logbus.common.config_def import ConfigError
from logbus.server.config.broker_config import BrokerConfig
from logbus.storage.formatter import FormatterError, format_directories, random_uuid
from logbus.storage.meta_properties import read_meta_properties

CONTROLLER = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093,2@localhost:9094,3@localhost:9095",
    "controller.listener.names": "CONTROLLER",
    "listeners": "CONTROLLER://localhost:9093",
}


def write_config(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def test_a_controller_config_is_parsed() -> None:
    config = BrokerConfig({**CONTROLLER, "controller.quorum.election.timeout.ms": "300"})
    kraft = config.kraft
    assert kraft is not None and kraft.is_controller and not kraft.is_broker
    assert sorted(kraft.voters) == [1, 2, 3]
    assert (kraft.voters[2].host, kraft.voters[2].port) == ("localhost", 9094)
    assert kraft.election_timeout_ms == 300
    assert kraft.fetch_timeout_ms == 2000
    assert kraft.broker_session_timeout_ms == 9000
    assert kraft.metadata_log_dir == config.log_dirs[0]
    assert config.node_id == 1


def test_zookeeper_mode_is_unchanged() -> None:
    config = BrokerConfig({"zookeeper.connect": "localhost:2181", "broker.id": "4"})
    assert config.kraft is None
    assert config.node_id == 4


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"node.id": None}, "Missing configuration `node.id` which is required"),
        ({"node.id": "7"}, "the node id 7 must be included in the set of voters"),
        ({"process.roles": "broker,broker"}, "Duplicate role names"),
        ({"process.roles": "ruler"}, "String must be one of: broker, controller"),
        ({"controller.quorum.voters": None}, "must contain the set of bootstrap controllers"),
        ({"controller.quorum.voters": "1@localhost"}, "Unable to parse voter entry"),
        ({"controller.quorum.voters": "x@localhost:1"}, "Failed to parse voter ID"),
        ({"controller.quorum.voters": "1@h:1,1@h:2"}, "Voter ID 1 is listed twice"),
        (
            {"controller.listener.names": None, "listeners": "PLAINTEXT://localhost:9093"},
            "controller.listener.names must contain",
        ),
        (
            {"controller.listener.names": "OTHER,CONTROLLER"},
            "appearing in the 'listeners'",
        ),
        ({"zookeeper.connect": "localhost:2181"}, "ZooKeeper mode or in KRaft mode"),
        ({"broker.id": "2"}, "to the same value as `broker.id`"),
        ({"controller.quorum.fetch.timeout.ms": "0"}, "Value must be at least 1"),
        (
            {
                "listeners": "CONTROLLER://localhost:9093,PLAINTEXT://localhost:9092",
            },
            "must only contain KRaft controller listeners",
        ),
        (
            {"process.roles": "broker", "node.id": "4", "listeners": "PLAINTEXT://:0"},
            None,
        ),
        ({"process.roles": "broker"}, "contains just the 'broker' role, the node id 1 must not"),
        (
            {"metadata.log.max.record.bytes.between.snapshots": "0"},
            "metadata.log.max.record.bytes.between.snapshots",
        ),
    ],
)
def test_bad_kraft_settings_name_the_setting(
    change: dict[str, str | None], words: str | None
) -> None:
    settings = {**CONTROLLER, **change}
    given = {k: v for k, v in settings.items() if v is not None}
    if words is None:
        assert BrokerConfig(given).kraft is not None
        return
    with pytest.raises(ConfigError, match=re.escape(words)):
        BrokerConfig(given)


def test_kraft_settings_without_process_roles_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"set process\.roles"):
        BrokerConfig({"controller.quorum.voters": "1@localhost:9093"})


def test_random_uuid_is_a_kafka_uuid() -> None:
    ids = {random_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_format_writes_meta_properties_v1_everywhere(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    meta_dir = str(tmp_path / "meta")
    cluster = random_uuid()
    lines = format_directories(dirs, meta_dir, cluster_id=cluster, node_id=3)
    assert lines[-1] == f"Formatting metadata directory {meta_dir}."
    directory_ids = set()
    for d in [*dirs, meta_dir]:
        text = (Path(d) / "meta.properties").read_text()
        assert "version=1" in text and f"cluster.id={cluster}" in text and "node.id=3" in text
        meta = read_meta_properties(Path(d))
        assert meta is not None and meta.version == 1 and meta.broker_id == 3
        directory_ids.add(meta.directory_id)
    assert len(directory_ids) == 3  # each directory has its own id


def test_format_refuses_a_formatted_directory_unless_asked(tmp_path: Path) -> None:
    dirs = [str(tmp_path / "a")]
    cluster = random_uuid()
    format_directories(dirs, str(tmp_path / "a"), cluster_id=cluster, node_id=1)
    before = (tmp_path / "a" / "meta.properties").read_text()
    with pytest.raises(FormatterError, match=r"is already formatted\. Use --ignore-formatted"):
        format_directories([*dirs, str(tmp_path / "b")], dirs[0], cluster_id=cluster, node_id=1)
    assert not (tmp_path / "b").exists()
    lines = format_directories(
        [*dirs, str(tmp_path / "b")], dirs[0], cluster_id=cluster, node_id=1,
        ignore_formatted=True,
    )  # fmt: skip
    assert lines == [f"Formatting data directory {tmp_path / 'b'}."]
    assert (tmp_path / "a" / "meta.properties").read_text() == before


def test_format_refuses_a_bad_cluster_id(tmp_path: Path) -> None:
    with pytest.raises(FormatterError, match="does not appear to be a valid UUID"):
        format_directories([str(tmp_path)], str(tmp_path), cluster_id="nope", node_id=1)


def test_storage_cli_format_then_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, meta_dir = tmp_path / "logs", tmp_path / "meta"
    props = write_config(
        tmp_path / "server.properties",
        {**CONTROLLER, "log.dirs": str(log_dir), "metadata.log.dir": str(meta_dir)},
    )
    assert main(["storage", "random-uuid"]) == 0
    cluster = capsys.readouterr().out.strip()
    assert main(["storage", "info", "-c", str(props)]) == 1
    assert f"{log_dir} does not exist" in capsys.readouterr().out
    assert main(["storage", "format", "-t", cluster, "-c", str(props)]) == 0
    out = capsys.readouterr().out
    assert f"Formatting data directory {log_dir}." in out
    assert f"Formatting metadata directory {meta_dir}." in out
    assert main(["storage", "format", "-t", cluster, "-c", str(props)]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", cluster, "-c", str(props), "--ignore-formatted"]) == 0
    assert "All of the log directories are already formatted." in capsys.readouterr().out
    assert main(["storage", "info", "-c", str(props)]) == 0
    out = capsys.readouterr().out
    assert "Found log directories:" in out
    assert f"Found metadata: {{cluster.id={cluster}, directory.id=" in out
    assert "node.id=1, version=1}" in out


def test_storage_cli_refuses_a_zookeeper_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = write_config(
        tmp_path / "zk.properties",
        {"zookeeper.connect": "localhost:2181", "log.dirs": str(tmp_path)},
    )
    assert main(["storage", "format", "-t", random_uuid(), "-c", str(props)]) == 1
    assert "appears to be for a legacy cluster" in capsys.readouterr().err
