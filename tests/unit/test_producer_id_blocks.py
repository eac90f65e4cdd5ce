"""Producer id blocks reserved in the metadata store (`/latest_producer_id_block`): two
brokers reserving their first block at the same time both get one, and never the same."""

from __future__ import annotations

from pathlib import Path

from logbus.controller.metadata_store import EmbeddedStore, NoNode
from logbus.server.producer_ids import PATH, ProducerIdManager


class LateReader(EmbeddedStore):
    """A store whose first read of the block node comes before another broker's create:
    it answers NoNode once although the node now exists (the interleaving of two brokers
    reserving their first block together)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.stale_reads = 1

    def get(self, path: str, watch: object = None) -> tuple[bytes, int]:
        if path == PATH and self.stale_reads:
            self.stale_reads -= 1
            raise NoNode(path)
        return super().get(path)


def test_two_brokers_reserving_their_first_block_together_get_different_blocks(
    tmp_path: Path,
) -> None:
    store = LateReader(tmp_path)
    first = ProducerIdManager(store, broker_id=1)
    second = ProducerIdManager(store, broker_id=2)
    store.stale_reads = 0
    a = first.next_id()  # creates the node
    store.stale_reads = 1
    b = second.next_id()  # read NoNode, its create fails: it must read again
    assert a == 0
    assert b == 1000
    assert store.stale_reads == 0
