"""Record batches (magic v2), records, headers, control records, CRC32C and compression.

The entry point is `logbus.records.batch.BatchHeader`, a view over the 61-byte header of a
batch as it travels from producer to disk to consumer.

Reading records: one decoder per job, each pinned to the reference by differential tests
(tests/unit/test_records_decoders.py, test_records_stride.py, test_records_columnar_runs.py,
test_records_validation.py):

- the reference: `record.decode_record` reads one record and names what is wrong with a
  bad one; `reader.decode_batch`, `iter_batch_records` and `iter_record_set` read whole
  batches with it. Use it wherever records are few or become `Record` objects anyway
  (the log cleaner, coordinators loading their logs, tools).
- the consumer's fast path, pure Python: `reader.decode_record_columns` (lists; record
  tuples through `decode_record_tuples`). It imports no numpy, so the client does not
  depend on it: runs of alike records are cut with strided bytes slices, the others
  read by an inlined per-record loop, and anything unusual by the reference decoder.
- the columnar fast path, numpy and Arrow: `columnar.decode_columns` (the Spark
  reader): runs as strided numpy views (`columnar_stride`), the other records of all
  batches decoded at once (`varint_arrays.record_fields`), batches with headers or
  faults by the consumer's path.
- the validator: `validation.check_records` accepts or refuses a batch's records without
  decoding them in Python: the C walker (`_validate.c`), or, when it is not built, a
  numpy walker (`validation_numpy`) made of the columnar path's parts.

The two fast paths stay separate because their callers want different outputs at
different costs: the consumer wants Python lists from one batch and must not load numpy
(a numpy call costs about a microsecond, more than a record's inline decode), the Spark
reader wants Arrow arrays from many batches, which Python lists would cost a copy and a
loop per record to fill. What they share is the definition of a run (`stride.find_run`,
the one run detector, and `stride.MIN_RUN`) and the varint tables (`varint.ZIGZAG_1`,
`ZIGZAG_2`, `varint_arrays.ZIGZAG_2_ARRAY`).
"""
