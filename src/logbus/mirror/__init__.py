"""Mirroring: copy topics from one cluster to another (Kafka's MirrorMaker). The entry
point is `MirrorMaker`; `logbus mirror` is its command line."""

from logbus.mirror.maker import MirrorError, MirrorMaker, MirrorSettings
from logbus.mirror.topics import TargetTopics, TopicPair

__all__ = ["MirrorError", "MirrorMaker", "MirrorSettings", "TargetTopics", "TopicPair"]
