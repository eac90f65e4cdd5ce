"""Every broker setting logbus accepts is used, or documented as having no effect on a
stand-alone broker (CLUSTER_ONLY, NO_EFFECT), or refused unless at its default
(ONLY_DEFAULT). A setting added to the definitions without any of these fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from logbus.common.config_def import ConfigError
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.broker_config_def import (
    BROKER_CONFIG_DEF,
    CLUSTER_ONLY,
    NO_EFFECT,
    ONLY_DEFAULT,
)

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "logbus"
# Where the broker's code lives; the client has settings of the same names.
BROKER_CODE = ("server", "storage", "controller", "coordinator")
DEFINITIONS = SRC / "server" / "broker_config_def.py"
DOCS = ROOT / "docs" / "configuration.md"


def broker_sources() -> str:
    texts = []
    for package in BROKER_CODE:
        for path in sorted((SRC / package).rglob("*.py")):
            if path == DEFINITIONS:
                continue
            text = path.read_text()
            # `name = _Setting[int]()` declares a typed attribute; reading it is a use.
            texts.append(re.sub(r"^\s+\w+ = _Setting\[.*$", "", text, flags=re.MULTILINE))
    return "\n".join(texts)


def is_used(name: str, sources: str) -> bool:
    attribute = name.replace(".", "_")
    return f'"{name}"' in sources or re.search(rf"\.{attribute}\b", sources) is not None


def documented(section: str) -> set[str]:
    """The setting names in the bullet list under `### {section}` of the docs."""
    text = DOCS.read_text()
    match = re.search(rf"^### {re.escape(section)}\n(.*?)(?=^#)", text, re.DOTALL | re.MULTILINE)
    assert match is not None, f"docs/configuration.md has no section {section!r}"
    return {
        name
        for line in match.group(1).splitlines()
        if line.startswith("- ")
        for name in re.findall(r"`([a-z0-9.]+)`", line.split(":")[0])
    }


def test_every_accepted_setting_is_used_or_listed() -> None:
    sources = broker_sources()
    listed = CLUSTER_ONLY | NO_EFFECT | set(ONLY_DEFAULT)
    unused = [
        name
        for name in BROKER_CONFIG_DEF.names()
        if name not in listed and not is_used(name, sources)
    ]
    assert unused == [], f"accepted but neither used nor listed: {unused}"


def test_the_lists_name_real_settings_once() -> None:
    for group in (CLUSTER_ONLY, NO_EFFECT, set(ONLY_DEFAULT)):
        assert group <= set(BROKER_CONFIG_DEF.names())
    assert not CLUSTER_ONLY & NO_EFFECT
    assert not (CLUSTER_ONLY | NO_EFFECT) & set(ONLY_DEFAULT)


@pytest.mark.parametrize(
    ("section", "names"),
    [
        ("Settings used only in a cluster", CLUSTER_ONLY),
        ("Settings accepted with no effect", NO_EFFECT),
        ("Settings supported only at their default", set(ONLY_DEFAULT)),
    ],
)
def test_the_docs_list_the_same_settings(section: str, names: set[str]) -> None:
    assert documented(section) == set(names)


@pytest.mark.parametrize(
    ("name", "value"),
    [("offsets.topic.compression.codec", "1"), ("log.message.downconversion.enable", "false")],
)
def test_a_value_logbus_cannot_honour_is_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match="Not supported"):
        BrokerConfig({name: value})
    BrokerConfig({name: str(BROKER_CONFIG_DEF[name].default).lower()})


def test_settings_without_effect_are_named() -> None:
    config = BrokerConfig({"num.network.threads": "3", "auto.leader.rebalance.enable": "false"})
    assert config.without_effect() == ["auto.leader.rebalance.enable", "num.network.threads"]


def test_a_cluster_member_names_only_settings_without_effect_anywhere() -> None:
    settings = {
        "num.network.threads": "3",
        "auto.leader.rebalance.enable": "false",
        "replica.lag.time.max.ms": "10000",
        "controlled.shutdown.max.retries": "5",
        "replica.socket.receive.buffer.bytes": "131072",
    }
    standalone = BrokerConfig(settings)
    member = BrokerConfig({**settings, "zookeeper.connect": "127.0.0.1:2181"})
    assert standalone.without_effect() == [
        "auto.leader.rebalance.enable",
        "controlled.shutdown.max.retries",
        "num.network.threads",
        "replica.lag.time.max.ms",
        "replica.socket.receive.buffer.bytes",
    ]
    assert member.without_effect() == ["num.network.threads", "replica.socket.receive.buffer.bytes"]
