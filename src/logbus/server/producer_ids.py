"""Producer id allocation for InitProducerId, in blocks reserved through the metadata
store at `/latest_producer_id_block` (Kafka's ZooKeeper layout), so ids stay unique across
restarts and brokers; and the epochs of the idempotent producers this broker served
(KIP-360 epoch bumps)."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict

from logbus.controller.metadata_store import BadVersion, MetadataStore, NodeExists, NoNode

BLOCK_SIZE = 1000
PATH = "/latest_producer_id_block"
MAX_EPOCH = 32767
"""The largest producer epoch (an int16). Kafka treats an epoch of MAX_EPOCH - 1 as
exhausted, keeping MAX_EPOCH free for the fencing marker of transactions."""
TRACKED_PRODUCERS = 100_000
"""How many idempotent producers' epochs are remembered (least recently served go first);
a forgotten producer that asks for an epoch bump gets a new id instead."""


class ProducerIdManager:
    """Hands out producer ids from the block this broker reserved. Event loop only.

    `threaded` (cluster mode: the store is ZooKeeper): blocks are reserved in a worker
    thread by `ensure_available`, which callers await before taking an id, so the event
    loop never waits for ZooKeeper. The compare-and-set on the block node keeps the ids
    of brokers reserving at the same time apart."""

    def __init__(self, store: MetadataStore, broker_id: int, *, threaded: bool = False) -> None:
        self.store = store
        self.broker_id = broker_id
        self.threaded = threaded
        self._reserving: asyncio.Lock | None = None
        self._next = 0
        self._end = -1
        self._epochs: OrderedDict[int, int] = OrderedDict()

    def _reserve_block(self) -> None:
        while True:
            try:
                data, version = self.store.get(PATH)
                start = int(json.loads(data)["block_end"]) + 1
            except NoNode:
                data, version, start = b"", -2, 0
            block = {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(start),
                "block_end": str(start + BLOCK_SIZE - 1),
            }
            try:
                if version == -2:
                    self.store.create_json(PATH, block)
                else:
                    self.store.set_json(PATH, block, version)
            except (BadVersion, NodeExists):  # another broker reserved one meanwhile
                continue
            self._next, self._end = start, start + BLOCK_SIZE - 1
            return

    async def ensure_available(self) -> None:
        """Reserve the next block (off the event loop) when this one is used up."""
        if not self.threaded or self._next <= self._end:
            return
        if self._reserving is None:
            self._reserving = asyncio.Lock()
        async with self._reserving:
            if self._next > self._end:
                await asyncio.to_thread(self._reserve_block)

    def available(self) -> bool:
        """Whether the reserved block has an id left."""
        return self._next <= self._end

    def take_block(self, start: int, end: int) -> None:
        """Hand out ids `start` to `end` (a block reserved elsewhere) from now on."""
        self._next, self._end = start, end

    def next_id(self) -> int:
        if self._next > self._end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid

    def new_producer(self) -> tuple[int, int]:
        """A fresh (producer_id, epoch 0) for an idempotent producer, remembered for bumps."""
        return self._remember(self.next_id(), 0)

    def bump_epoch(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """KIP-360: the next (producer_id, epoch) of an idempotent producer that asks to bump
        its current epoch.

        A producer this broker handed out gets `producer_epoch + 1`. A retry of a bump whose
        answer was lost (the epoch just before the remembered one) gets the same answer
        again. An unknown or forgotten producer, a stale epoch, or an exhausted epoch gets a
        new producer id with epoch 0, which is always safe for an idempotent producer.
        """
        current = self._epochs.get(producer_id)
        if current is None or producer_epoch < current - 1:
            return self.new_producer()
        if producer_epoch == current - 1:
            self._epochs.move_to_end(producer_id)
            return producer_id, current
        if producer_epoch + 1 >= MAX_EPOCH:
            del self._epochs[producer_id]
            return self.new_producer()
        return self._remember(producer_id, producer_epoch + 1)

    def _remember(self, producer_id: int, epoch: int) -> tuple[int, int]:
        self._epochs[producer_id] = epoch
        self._epochs.move_to_end(producer_id)
        while len(self._epochs) > TRACKED_PRODUCERS:
            self._epochs.popitem(last=False)
        return producer_id, epoch
