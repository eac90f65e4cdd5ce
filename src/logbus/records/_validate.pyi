# The compiled record walker (_validate.c); logbus.records.validation documents it.
def check_section(
    data: bytes | bytearray | memoryview, count: int, want_keyless: bool, /
) -> tuple[int, int, int, list[int] | None]: ...
