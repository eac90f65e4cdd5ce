"""KRaft's cluster metadata as values (KIP-500, KIP-631): the records of
`__cluster_metadata` (`records.py`), the `MetadataImage` they build (`image.py`), the
`MetadataDelta` that replays records onto an image (`delta.py`) and the records that write
an image back out for a snapshot (`image_writer.py`). Kafka's `org.apache.kafka.image`.

Pure code, no I/O: both the KRaft controller and (later) KRaft brokers build their image
by replaying the same records with it. The entry point is `delta.MetadataDelta`.
"""
