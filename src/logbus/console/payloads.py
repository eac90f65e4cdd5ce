"""How a record's key, value and header values are shown: as text, pretty JSON or hex.
Bytes that are not UTF-8 are shown as hex whatever was asked; values over the display
limit are cut, with a note of their full size."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Literal

Mode = Literal["text", "json", "hex"]
MODES: tuple[Mode, ...] = ("text", "json", "hex")
# Longer keys and values are shown cut to this many bytes.
DISPLAY_LIMIT = 10 * 1024


@dataclass(frozen=True)
class Shown:
    """One payload ready for the page: `text` to print, `kind` what it is shown as
    ("text", "json", "hex" or "null") and `note` why it is not shown as asked, or that it
    was cut ("" when neither)."""

    text: str
    kind: str
    note: str = ""
    size: int = 0


def show(
    data: bytes | None, mode: Mode, limit: int = DISPLAY_LIMIT, *, strict_json: bool = True
) -> Shown:
    """`data` as `mode` asks (None is shown as null). Without `strict_json`, text that is
    not JSON is shown as text without a note (keys and headers are rarely JSON)."""
    if data is None:
        return Shown("null", "null")
    size = len(data)
    cut = data[:limit]
    notes = [f"{size:,} bytes, the first {limit:,} shown"] if size > limit else []
    if mode == "hex":
        return Shown(cut.hex(" "), "hex", "; ".join(notes), size)
    text = _utf8(cut, final=size <= limit)
    if text is None:
        notes.insert(0, "not UTF-8: shown as hex")
        return Shown(cut.hex(" "), "hex", "; ".join(notes), size)
    if mode == "json":
        if size > limit:
            notes.append("cut, so not parsed as JSON")
        else:
            try:
                return Shown(json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json",
                             "", size)
            except ValueError:
                if strict_json:
                    notes.append("not JSON: shown as text")
    return Shown(text, "text", "; ".join(notes), size)


def _utf8(data: bytes, *, final: bool) -> str | None:
    """`data` decoded as UTF-8, or None if it is not; a character cut at the end of a
    shortened value is dropped (`final` False)."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return None
