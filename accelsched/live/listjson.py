"""A List's JSON decoded one item at a time: the informers' first list without its whole decoded tree at once.

``json.loads`` of a list response builds every item before the caller sees the first, so a list of 30,000 pods
held all 30,000 decoded pods (about 11 KB each) beside the response's bytes before any was trimmed. Here the
top-level object is walked by hand and each element of ``items`` is decoded and handed to ``each`` before the next
is read, so only what ``each`` keeps of an item stays (client-go decodes a list into compact structs at once; this
is the nearest a dict-based informer gets). Anything that is not a JSON object is left to ``json.loads``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def decode_list(text: str, each: Callable[[Any], Any]) -> Any:
    """``json.loads(text)``, with every element of a top-level ``items`` array replaced by ``each(element)``."""
    skip = _SPACE.match
    idx = skip(text, 0).end()
    if not text.startswith("{", idx):
        out = json.loads(text)
        if isinstance(out, dict) and isinstance(out.get("items"), list):
            out["items"] = [each(item) for item in out["items"]]
        return out
    out: dict[str, Any] = {}
    idx = skip(text, idx + 1).end()
    if text.startswith("}", idx):
        return _end(text, idx + 1, out)
    while True:
        key, idx = _DECODER.raw_decode(text, idx)
        idx = _expect(text, skip(text, idx).end(), ":")
        idx = skip(text, idx).end()
        if key == "items" and text.startswith("[", idx):
            out[key], idx = _items(text, skip(text, idx + 1).end(), each)
        else:
            out[key], idx = _DECODER.raw_decode(text, idx)
        idx = skip(text, idx).end()
        if text.startswith("}", idx):
            return _end(text, idx + 1, out)
        idx = skip(text, _expect(text, idx, ",")).end()


def _items(text: str, idx: int, each: Callable[[Any], Any]) -> tuple[list[Any], int]:
    items: list[Any] = []
    if text.startswith("]", idx):
        return items, idx + 1
    while True:
        item, idx = _DECODER.raw_decode(text, idx)
        items.append(each(item))  # the decoded item goes now, before the next is decoded
        idx = _SPACE.match(text, idx).end()
        if text.startswith("]", idx):
            return items, idx + 1
        idx = _SPACE.match(text, _expect(text, idx, ",")).end()


def _end(text: str, idx: int, out: dict[str, Any]) -> dict[str, Any]:
    idx = _SPACE.match(text, idx).end()
    if idx != len(text):
        raise json.JSONDecodeError("Extra data", text, idx)
    return out


def _expect(text: str, idx: int, char: str) -> int:
    if not text.startswith(char, idx):
        raise json.JSONDecodeError(f"Expecting {char!r} delimiter", text, idx)
    return idx + 1
