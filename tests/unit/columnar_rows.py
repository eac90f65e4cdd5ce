"""Decoded record columns as rows (offset, timestamp, timestamp type, key, value, headers),
their arrays validated on the way: what the columnar decoder tests compare."""

from __future__ import annotations

import pyarrow as pa

from logbus.records.columnar import RecordColumns

Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def rows_of(columns: RecordColumns) -> list[Row]:
    n = len(columns)
    for array in (columns.keys, columns.values):
        assert array.type == pa.binary()
        assert len(array) == n
        array.validate(full=True)
    headers = columns.headers if columns.headers is not None else [()] * n
    return list(
        zip(
            columns.offsets.tolist(),
            columns.timestamps.tolist(),
            columns.timestamp_types.tolist(),
            columns.keys.to_pylist(),
            columns.values.to_pylist(),
            headers,
            strict=True,
        )
    )
