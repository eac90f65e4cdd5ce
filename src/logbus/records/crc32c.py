"""CRC32C (Castagnoli), as RecordBatch v2 uses it, from the C-backed `crc32c` package."""

from crc32c import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC32C of `data`, continuing from `value`."""
    return int(_crc32c(data, value))
