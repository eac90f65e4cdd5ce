"""A range of bytes in an open segment file, sent to a peer without being read into Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`size` bytes of `file` starting at `position`.

    The file object stays owned by its segment; a slice is only valid while the segment is
    open, which the delayed deletion of segments guarantees for in-flight reads.
    """

    file: BinaryIO
    position: int
    size: int

    def read(self) -> bytes:
        """The bytes of the slice (a copy; used where zero-copy is impossible)."""
        import os

        return os.pread(self.file.fileno(), self.size, self.position)
