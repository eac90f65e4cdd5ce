"""What the log cleaner knows of transactions while it reads a range of the log (Kafka's
`CleanedTransactionMetadata`).

Fed the aborted transactions of the range (from the transaction indexes) and every batch
in offset order, it says whether a data batch belongs to an aborted transaction (its
records are removed) and whether a marker may go: an ABORT marker once no record of its
transaction was met in this pass, a COMMIT marker once none of its transaction's batches
was. A marker that may go is still kept until its batch's delete horizon passes (as a
tombstone). ABORT markers kept because their records were met are indexed again in the
cleaned segment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from logbus.records.batch import BatchHeader
from logbus.records.control import ControlType
from logbus.storage.transaction_index import AbortedTxn


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        # producer id -> (its aborted transaction, whether a batch of it was met)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._ongoing_committed: set[int] = set()
        # ABORT markers kept with records of their transaction met: the cleaned
        # segment's transaction index.
        self.retained_aborted: list[AbortedTxn] = []

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._ongoing_aborted[txn.producer_id] = (txn, False)

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Whether the batch belongs to an aborted transaction (drop its records)."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        pid = header.producer_id
        ongoing = self._ongoing_aborted.get(pid)
        if ongoing is not None:
            self._ongoing_aborted[pid] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(pid)
        return False

    def on_control_batch(self, header: BatchHeader, control_type: int | None) -> bool:
        """Whether the marker may be removed (once its delete horizon passes)."""
        self._start_up_to(header.last_offset)
        pid = header.producer_id
        if control_type == ControlType.ABORT:
            ongoing = self._ongoing_aborted.pop(pid, None)
            if ongoing is not None and ongoing[1]:
                self.retained_aborted.append(ongoing[0])
                return False
            return True
        if control_type == ControlType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False
