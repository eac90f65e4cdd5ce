"""Record batches (magic v2), records, headers, control records, CRC32C and compression.

The entry point is `logbus.records.batch.BatchHeader`, a view over the 61-byte header of a
batch as it travels from producer to disk to consumer.
"""
