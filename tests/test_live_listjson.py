"""A List's JSON decoded item by item (live.listjson): the same document as json.loads, each item handed over
as it is decoded, bad JSON refused as json.loads refuses it."""

from __future__ import annotations

import json

import pytest

from accelsched.live.listjson import decode_list
from accelsched.live.trim import trim

PODS = {
    "kind": "PodList",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "42", "continue": "abc"},
    "items": [
        {"metadata": {"name": f"p{i}", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]}, "spec": {}}
        for i in range(3)
    ],
}


@pytest.mark.parametrize("indent", [None, 2])
def test_the_same_document_as_json_loads(indent: int | None) -> None:
    text = json.dumps(PODS, indent=indent)
    assert decode_list(text, lambda item: item) == json.loads(text)


def test_each_item_is_handed_over_in_order_and_replaced_by_what_it_returns() -> None:
    seen: list[str] = []

    def each(item: dict) -> dict:
        seen.append(item["metadata"]["name"])
        return trim(item)

    out = decode_list(json.dumps(PODS), each)
    assert seen == ["p0", "p1", "p2"]
    assert [item["metadata"] for item in out["items"]] == [{"name": f"p{i}", "namespace": "ns"} for i in range(3)]
    assert out["metadata"] == {"resourceVersion": "42", "continue": "abc"}


@pytest.mark.parametrize("text", ["{}", '{"items": []}', '{"items": null}', "[1, 2]", '{"kind": "PodList"}'])
def test_documents_without_items_are_as_json_loads_reads_them(text: str) -> None:
    assert decode_list(text, lambda item: ("each", item)) == json.loads(text)


BAD = ['{"items": [1 2]}', '{"items": [1,]}', '{"kind" "x"}', '{"items": [', "", '{"items": []} x', "{} {}"]


@pytest.mark.parametrize("text", BAD)
def test_bad_json_is_refused_as_json_loads_refuses_it(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        decode_list(text, lambda item: item)
