"""The map grouped by an NVLink domain (``nvidia.com/gpu.clique``): each group header shows the domain's free shape,
nodes with every device free and the largest gang of whole-node pods that fits there (cordoned nodes left out)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from browserkit import wait_rendered

from accelsched.ui.state import FilesState

CLIQUE = "nvidia.com/gpu.clique"


def test_clique_headers_show_whole_free_nodes_and_the_largest_gang(ui_server: Any, page: Any, tmp_path: Path) -> None:
    from benchmarks.ui import ACCEL, generate

    cluster = generate(12)
    pods = [p for p in cluster.pods if p["spec"].get("nodeName")]  # no Pending pod: the run moves nothing
    for i, node in enumerate(cluster.nodes):
        node["metadata"]["labels"][CLIQUE] = f"nvl-{i // 6}"
    cluster.nodes[7]["spec"]["unschedulable"] = True  # wholly free, but cordoned: no gang goes there
    held = {p["spec"]["nodeName"] for p in pods if ACCEL in p["spec"]["containers"][0]["resources"].get("requests", {})}
    expected: dict[str, tuple[int, int]] = {}
    for node in cluster.nodes:
        clique = node["metadata"]["labels"][CLIQUE]
        free, count = expected.get(clique, (0, 0))
        whole = node["metadata"]["name"] not in held and not node["spec"].get("unschedulable")
        expected[clique] = (free + whole, count + 1)
    assert sorted(f for f, _ in expected.values()) == [1, 1]  # the case is what the docstring says
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*cluster.nodes, *pods]}))
    server = ui_server(FilesState.load([str(path)]))
    page.goto(server.url + f"?group={CLIQUE}")
    wait_rendered(page)
    shown = page.eval_on_selector_all(
        ".group-row[data-group]", "es => es.map(e => [e.dataset.group, e.querySelector('.group-shape').textContent])"
    )
    assert {g for g, _ in shown} == set(expected)
    for clique, text in shown:
        free, count = expected[clique]
        assert re.fullmatch(rf"{free}/{count} nodes free, gang ≤ {free} whole nodes", text), (clique, text)
