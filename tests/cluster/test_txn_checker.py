"""The transactional checker on hand-made histories: a clean consume-transform-produce
history passes, and each anomaly (aborted read, partial transaction, lost committed record,
duplicate, reordering, read_uncommitted gaps, input offsets skipped, transformed twice or
committed apart from their transaction) is found."""

from __future__ import annotations

from checker import Consumed
from txn_checker import Txn, TxnHistory, TxnOutcome, check_transactions

IN = ("in", 0)


class Log:
    """A partition log of 'out' as a broker would write it: records at increasing
    offsets, a marker after each transaction's records."""

    def __init__(self) -> None:
        self.next = {0: 0, 1: 0}
        self.records: list[Consumed] = []  # everything written (read_uncommitted)

    def write(self, txn: Txn, count: int) -> None:
        for i in range(count):
            partition = i % 2
            send = txn.send("out", partition)
            offset = self.next[partition]
            self.next[partition] += 1
            send.ok(partition, offset)
            self.records.append(Consumed("out", partition, offset, send.value))

    def markers(self) -> None:
        for partition in self.next:
            self.next[partition] += 1


def ctp_history() -> tuple[TxnHistory, Log, list[Txn]]:
    """Four transactions consuming in-0 [0, 10), [10, 20) (aborted), [10, 20), [20, 25),
    two outputs per input... here `count` outputs each: 4, 4, 4, 2."""
    history = TxnHistory()
    log = Log()
    txns = []
    for (start, end), outcome in [
        ((0, 10), TxnOutcome.COMMITTED),
        ((10, 20), TxnOutcome.ABORTED),
        ((10, 20), TxnOutcome.COMMITTED),
        ((20, 25), TxnOutcome.COMMITTED),
    ]:
        txn = history.begin("ctp")
        txn.consumed(IN, start, end)
        log.write(txn, 4 if end - start == 10 else 2)
        txn.send_offsets("g", {IN: end})
        log.markers()
        txn.outcome = outcome
        txns.append(txn)
    return history, log, txns


def visible(log: Log, txns: list[Txn]) -> list[Consumed]:
    """What read_committed sees when exactly `txns` are committed."""
    values = {s.value for t in txns for s in t.sends}
    return [r for r in log.records if r.value in values]


def committed_txns(txns: list[Txn]) -> list[Txn]:
    return [t for t in txns if t.outcome is TxnOutcome.COMMITTED]


def test_a_clean_transactional_history_passes() -> None:
    history, log, txns = ctp_history()
    result = check_transactions(
        history,
        visible(log, committed_txns(txns)),
        uncommitted=log.records,
        group_offsets={IN: 25},
    )
    assert result.ok, result
    assert (result.committed, result.aborted, result.unknown) == (3, 1, 0)
    assert (result.read_committed, result.read_uncommitted) == (10, 14)
    assert "no anomalies" in str(result)


def test_a_record_of_an_aborted_transaction_read_is_an_aborted_read() -> None:
    history, log, txns = ctp_history()
    read = visible(log, [*committed_txns(txns), txns[1]])
    result = check_transactions(history, read, group_offsets={IN: 25})
    assert {a.txn_id for a in result.aborted_reads} == {"ctp/1"}
    assert len(result.aborted_reads) == 4
    assert not result.ok and "aborted_reads: 4" in str(result)


def test_a_committed_transaction_partly_visible_is_partial_and_lost() -> None:
    history, log, txns = ctp_history()
    missing = txns[2].sends[1].value
    read = [r for r in visible(log, committed_txns(txns)) if r.value != missing]
    result = check_transactions(history, read, group_offsets={IN: 25})
    assert [(p.txn_id, p.visible, p.missing) for p in result.partial] == [("ctp/2", 3, (missing,))]
    assert [lost.send.value for lost in result.lost] == [missing]


def test_an_unknown_transaction_is_all_or_nothing() -> None:
    history, log, txns = ctp_history()
    txns[3].unknown("timed out")
    committed = committed_txns(txns)
    # not visible at all, offsets not taken: it aborted, fine
    assert check_transactions(history, visible(log, committed), group_offsets={IN: 20}).ok
    # visible whole with its offsets: it committed, fine
    whole = check_transactions(history, visible(log, [*txns[::2], txns[3]]), group_offsets={IN: 25})
    assert whole.ok, whole
    assert whole.unknown_effective == 1
    # half visible: partial
    half = visible(log, committed)
    half.append(visible(log, [txns[3]])[0])
    result = check_transactions(history, half, group_offsets={IN: 20})
    assert [p.outcome for p in result.partial] == [TxnOutcome.UNKNOWN]


def test_a_record_read_twice_is_duplicated() -> None:
    history, log, txns = ctp_history()
    read = visible(log, committed_txns(txns))
    twice = read[0]
    read.append(Consumed("out", twice.partition, 99, twice.value))
    result = check_transactions(history, read, group_offsets={IN: 25})
    assert [d.value for d in result.duplicated] == [twice.value]


def test_records_of_one_partition_out_of_order_are_found() -> None:
    history, log, txns = ctp_history()
    read = visible(log, committed_txns(txns))
    p0 = [i for i, r in enumerate(read) if r.partition == 0]
    a, b = read[p0[0]], read[p0[1]]
    # the broker gave them their offsets swapped, the reader polled them in offset order
    history.history.get(a.value).ok(0, b.offset)  # type: ignore[union-attr]
    history.history.get(b.value).ok(0, a.offset)  # type: ignore[union-attr]
    read[p0[0]], read[p0[1]] = a._replace(value=b.value), b._replace(value=a.value)
    result = check_transactions(history, read, group_offsets={IN: 25})
    assert result.reordered
    backwards = list(read)
    backwards[p0[0]], backwards[p0[1]] = read[p0[1]], read[p0[0]]
    assert check_transactions(history, backwards, group_offsets={IN: 25}).backwards


def test_read_uncommitted_must_hold_every_acknowledged_record() -> None:
    history, log, txns = ctp_history()
    aborted_value = txns[1].sends[0].value
    raw = [r for r in log.records if r.value != aborted_value]
    result = check_transactions(
        history, visible(log, committed_txns(txns)), uncommitted=raw, group_offsets={IN: 25}
    )
    assert [lost.send.value for lost in result.uncommitted["lost"]] == [aborted_value]
    # what read_committed saw must be in the raw log at the same place
    moved = [r._replace(offset=r.offset + 100) for r in log.records]
    result = check_transactions(
        history, visible(log, committed_txns(txns)), uncommitted=moved, group_offsets={IN: 25}
    )
    assert len(result.hidden) == 10


def test_input_offsets_must_match_the_committed_transactions() -> None:
    history, log, txns = ctp_history()
    read = visible(log, committed_txns(txns))
    # the aborted transaction's offset taken: the group's offset does not match
    result = check_transactions(history, read, group_offsets={IN: 30})
    assert [a.problem for a in result.input_offsets] == [
        "committed offset 30, but the committed transactions consumed up to 25"
    ]
    # a committed transaction's offsets lost: the group would transform its input again
    assert check_transactions(history, read, group_offsets={IN: 20}).input_offsets
    # nothing committed at all
    assert check_transactions(history, read, group_offsets={IN: -1}).input_offsets


def test_input_transformed_twice_or_skipped_is_found() -> None:
    history, log, txns = ctp_history()
    txns[1].committed()  # two committed transactions of [10, 20): transformed twice
    result = check_transactions(history, visible(log, txns), group_offsets={IN: 25})
    assert ["transformed [10, 20) again" in a.problem for a in result.input_offsets] == [True]
    history, log, txns = ctp_history()
    txns[2].aborted()  # [10, 20) never committed, yet [20, 25) was: skipped
    result = check_transactions(history, visible(log, committed_txns(txns)), group_offsets={IN: 25})
    assert [a.problem for a in result.input_offsets] == ["inputs [10, 20) skipped"]


def test_offsets_sent_must_be_the_end_of_the_input_consumed() -> None:
    history, log, txns = ctp_history()
    txns[0].send_offsets("g", {IN: 9})
    result = check_transactions(history, visible(log, committed_txns(txns)), group_offsets={IN: 25})
    assert [a.problem for a in result.input_offsets] == ["ctp/0 consumed [0, 10) but sent offset 9"]


def test_an_acknowledged_send_outside_transactions_is_checked_as_before() -> None:
    history, log, txns = ctp_history()
    plain = history.history.send("plain", "out", partition=1)
    plain.ok(1, 50)
    read = visible(log, committed_txns(txns))
    result = check_transactions(history, read, group_offsets={IN: 25})
    assert [lost.send for lost in result.lost] == [plain]
    read.append(Consumed("out", 1, 50, plain.value))
    assert check_transactions(history, read, group_offsets={IN: 25}).ok
