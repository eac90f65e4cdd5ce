"""Hand-written encoder for Fetch responses v4-17: the hot path of every read.

Record data stays as it came from the log: file slices are spliced into the output as
their own chunks, to be sent with `sendfile`. Produces the same bytes as the generic codec
for the fields the broker sets (of the per-partition tagged fields only `diverging_epoch`,
which a leader sends a follower whose log diverged, is emitted).
"""

from __future__ import annotations

import struct

from logbus.protocol import types as t
from logbus.protocol.messages.fetch_response import FetchResponse

_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_ABORTED = struct.Struct(">qq")
_DIVERGING = struct.Struct(">iq")  # epoch, end offset
FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13


def encode_fetch_response(w: t.Writer, body: FetchResponse, version: int) -> None:
    flexible = version >= FLEXIBLE_FROM
    pack, write = w.pack, w.write
    if version >= 7:
        write(
            _HEAD.pack(
                body.get("throttle_time_ms", 0),
                body.get("error_code", 0),
                body.get("session_id", 0),
            )
        )
    else:
        pack(t.INT32, body.get("throttle_time_ms", 0))
    topics = body["responses"]
    t.write_length(w, len(topics), flexible, wide=True)
    for topic in topics:
        if version >= TOPIC_IDS_FROM:
            write(topic["topic_id"].bytes)
        else:
            name = topic["topic"].encode()
            t.write_length(w, len(name), flexible, wide=False)
            write(name)
        partitions = topic["partitions"]
        t.write_length(w, len(partitions), flexible, wide=True)
        for p in partitions:
            if version >= 5:
                write(
                    _PARTITION.pack(
                        p["partition_index"],
                        p["error_code"],
                        p["high_watermark"],
                        p["last_stable_offset"],
                        p["log_start_offset"],
                    )
                )
            else:
                write(
                    _PARTITION.pack(
                        p["partition_index"],
                        p["error_code"],
                        p["high_watermark"],
                        p["last_stable_offset"],
                        0,
                    )[:-8]
                )
            aborted = p.get("aborted_transactions")
            if aborted is None:
                t.write_length(w, -1, flexible, wide=True)
            else:
                t.write_length(w, len(aborted), flexible, wide=True)
                for txn in aborted:
                    write(_ABORTED.pack(txn["producer_id"], txn["first_offset"]))
                    if flexible:
                        w.uvarint(0)
            if version >= 11:
                pack(t.INT32, p.get("preferred_read_replica", -1))
            records = p.get("records")
            if records is None:
                t.write_length(w, -1, flexible, wide=True)
            else:
                t.write_length(w, t.records_size(records), flexible, wide=True)
                t.write_records_body(w, records)
            if flexible:
                diverging = p.get("diverging_epoch")
                if diverging is None:
                    w.uvarint(0)
                else:
                    # one tagged field: tag 0, the DivergingEpoch struct (KIP-595/KIP-320)
                    w.uvarint(1)
                    w.uvarint(0)
                    w.uvarint(_DIVERGING.size + 1)
                    write(_DIVERGING.pack(diverging["epoch"], diverging["end_offset"]))
                    w.uvarint(0)
        if flexible:
            w.uvarint(0)
    if flexible:
        w.uvarint(0)
