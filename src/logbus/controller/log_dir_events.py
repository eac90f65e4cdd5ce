"""Log dir failures told to the controller through ZooKeeper, as Kafka's
`LogDirEventNotificationZNode`: a broker whose log dir failed creates a persistent
sequential node `/log_dir_event_notification/log_dir_event_<seq>` holding
`{"version":1,"broker":<id>,"event":1}`; the active controller watches the children, reads
and deletes each, and sends the broker a LeaderAndIsr for every replica it holds. The
broker answers KAFKA_STORAGE_ERROR for the replicas of its failed dirs, and those
replicas are taken offline (`offline_replicas`): out of the ISR, and a new leader elected
where they led, as if only that replica's broker had died.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Collection

from logbus.controller.cluster_metadata import PartitionState
from logbus.controller.election import on_brokers_lost
from logbus.controller.metadata_store import ChildWatch, MetadataStore, NodeExists, NoNode

log = logging.getLogger(__name__)

LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent


def notify_log_dir_failure(store: MetadataStore, broker_id: int) -> str:
    """The broker's notice (blocking: call off the event loop); the node's path."""
    data = json.dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE})
    return store.create(
        f"{LOG_DIR_EVENT_PATH}/{LOG_DIR_EVENT_PREFIX}", data.encode(), sequential=True
    )


def take_log_dir_events(store: MetadataStore, watch: ChildWatch) -> set[int]:
    """The brokers named by the pending notices, each notice deleted once read; the
    children watch set again."""
    try:
        children = store.children(LOG_DIR_EVENT_PATH, watch=watch)
    except NoNode:
        with contextlib.suppress(NodeExists):
            store.create(LOG_DIR_EVENT_PATH, b"")
        children = store.children(LOG_DIR_EVENT_PATH, watch=watch)
    brokers: set[int] = set()
    for child in sorted(children):
        path = f"{LOG_DIR_EVENT_PATH}/{child}"
        try:
            data, _ = store.get(path)
            store.delete(path)
        except NoNode:
            continue
        try:
            brokers.add(int(json.loads(data)["broker"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring an unreadable log dir event %s: %r", path, data[:200])
    return brokers


def offline_replica_state(
    state: PartitionState,
    broker_id: int,
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> PartitionState | None:
    """The partition's state once `broker_id`'s replica of it is offline (None: nothing
    changes): out of the ISR, and a new leader from the others if it led."""
    return on_brokers_lost(
        state, {broker_id}, [b for b in live if b != broker_id], unclean, controller_epoch
    )
