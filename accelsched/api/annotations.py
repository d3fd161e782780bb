"""Annotations that hold a small YAML document: accelsched's compact node forms (topology layout, device
partitioning), read with the manifests' own reader and checked at the edge.

Kept apart from api/objects.py so that the topology and devices packages, which objects.py uses to read a Node,
need nothing from objects.py in return.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelsched.api import reader
from accelsched.errors import InputError, Where


def yaml_annotation(where: Where, key: str, text: str, fields: set[str], expected: str) -> Mapping[str, Any]:
    """An annotation holding a small YAML document (accelsched's compact node forms), checked at the edge."""
    path = f"metadata.annotations[{key}]"
    try:
        # The manifests' own reader: libyaml (nesting bounded), duplicate keys refused, aliases bounded.
        docs = reader.parse(text, "")
    except InputError as exc:
        raise where.error(path, f"is not valid YAML ({exc.message})") from None
    doc = docs[0] if len(docs) == 1 else None
    if not isinstance(doc, Mapping):
        raise where.error(path, f"must be a mapping ({expected})")
    unknown = set(doc) - fields
    if unknown:
        raise where.error(path, f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    return doc
