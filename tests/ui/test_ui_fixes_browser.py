"""The web view's bugs of issue 27, each as the user saw it in Chromium: a row's flags, the evictions' causes, a DRA
pod's device count, the node drawer's free column, the capacity table's units, free devices after a drain, the
pinned group header, the live dot, long node names.

Expected values come from the engine's cluster after the run (``hub.run.session.cluster``), the raw input
documents or ``hub.whatif``, never from the page's own JSON alone.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from browserkit import text_of, texts, wait_rendered

from accelsched.ui.state import DemoState, FilesState

pytestmark = pytest.mark.integration

GKE_A = "gke-a3-mega-pool-1-2f8c91d0-abcd"
GKE_B = "gke-a3-mega-pool-1-2f8c91d0-wxyz"
TAINTS = ["nvidia.com/gpu=present:NoSchedule", "maintenance=true:NoExecute"]


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    wait_rendered(page)
    page.wait_for_selector("#map .node-row[data-node]")


def _node(name: str, unschedulable: bool = False, taints: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = []
        for t in taints:
            kv, effect = t.rsplit(":", 1)
            key, _, value = kv.partition("=")
            spec["taints"].append({"key": key, "value": value, "effect": effect})
    alloc = {"cpu": "200", "memory": "1800Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "cloud.google.com/gke-nodepool": "a3"}},
        "spec": spec,
        "status": {"capacity": alloc, "allocatable": alloc},
    }


@pytest.fixture
def gke_state(tmp_path: Path) -> FilesState:
    """Two GKE nodes whose names differ only at the end; the first cordoned (with the taint the node lifecycle
    controller adds for it) and tainted twice."""
    cordon = "node.kubernetes.io/unschedulable:NoSchedule"
    docs = [_node(GKE_A, True, [*TAINTS, cordon]), _node(GKE_B)]
    path = tmp_path / "gke.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return FilesState.load([path])


# ------------------------------------------------------------------------------------------------ the map's rows


def test_a_row_shows_every_flag(ui_server: Any, page: Any, gke_state: FilesState) -> None:
    server = ui_server(gke_state)
    open_page(page, server.url)
    flags = page.evaluate(
        """(name) => {
            const row = document.querySelector(`.node-row[data-node="${name}"]`);
            const box = row.querySelector('.flags').getBoundingClientRect();
            return [...row.querySelectorAll('.flags .flag')].map(f => {
                const r = f.getBoundingClientRect();
                const shown = getComputedStyle(f).display !== 'none' && r.width >= 14 && r.height > 0
                    && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5
                    && r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
                return {title: f.title, shown};
            });
        }""",
        GKE_A,
    )
    assert [f for f in flags if not f["shown"]] == [], "every flag of the row is visible, none clipped"
    titles = " ".join(f["title"] for f in flags)
    assert "cordoned" in titles
    for taint in TAINTS:
        assert taint in titles, taint


def test_node_names_are_cut_in_the_middle_with_the_full_name_on_hover(
    ui_server: Any, page: Any, gke_state: FilesState
) -> None:
    server = ui_server(gke_state)
    open_page(page, server.url)
    shown = {}
    for name in (GKE_A, GKE_B):
        button = page.locator(f'.node-row[data-node="{name}"] .node-name')
        shown[name] = button.inner_text()
        assert name in (button.get_attribute("title") or ""), "the full name is on hover"
        assert button.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), f"{name}: the text is not clipped"
        assert shown[name].endswith(name[-4:]), f"{name}: the end of the name stays: {shown[name]!r}"
    assert shown[GKE_A] != shown[GKE_B]


def test_the_group_pin_covers_no_row(ui_server: Any, page: Any, tmp_path: Path) -> None:
    from benchmarks.ui import files_state, generate

    server = ui_server(files_state(generate(64), tmp_path))
    open_page(page, server.url)
    # rows: the pdu-0000 header, its 8 nodes, the next header...: put node-00003 at the top of the map
    page.evaluate("() => { const m = document.querySelector('#map'); m.scrollTop = 4 * 36; }")
    page.wait_for_timeout(200)
    hit = page.evaluate(
        """() => {
            const m = document.querySelector('#map').getBoundingClientRect();
            const at = (y) => { const e = document.elementFromPoint(m.left + 120, y); return e && e.closest('.node-row')
                ? e.closest('.node-row').dataset.node : (e ? e.className : null); };
            return [at(m.top + 4), at(m.top + 20)];
        }"""
    )
    assert hit == ["node-00003", "node-00003"], "the first row under the pinned group is not covered"
    assert "pdu-0000" in text_of(page, ".group-pin"), "the pin still names the group scrolled into"


def test_offline_and_demo_say_static_snapshot_not_live(ui_server: Any, page: Any, gke_state: FilesState) -> None:
    for state in (gke_state, DemoState.lab(None)):
        server = ui_server(state)
        open_page(page, server.url)
        page.wait_for_timeout(300)  # the event stream has connected
        dot = page.locator('#status [data-field="live"]')
        assert "static snapshot" in dot.inner_text()
        assert "on" not in (dot.get_attribute("class") or "").split()
        assert "as they happen" not in (dot.get_attribute("title") or "")


# ------------------------------------------------------------------------------------------------ Pending and drawer


def _dra_devices(state: DemoState, key: str) -> int:
    """Devices a pod's claims ask for, from the raw documents: each claim's (or template's) requests' counts."""
    name = key.split("/")[1]
    docs = [d.doc for d in state.docs]
    pod = next(d for d in docs if d.get("kind") == "Pod" and d["metadata"]["name"] == name)
    total = 0
    for ref in pod["spec"].get("resourceClaims") or []:
        kind, obj = ("ResourceClaimTemplate", ref.get("resourceClaimTemplateName")) if ref.get(
            "resourceClaimTemplateName") else ("ResourceClaim", ref.get("resourceClaimName"))  # fmt: skip
        doc = next(d for d in docs if d.get("kind") == kind and d["metadata"]["name"] == obj)
        spec = doc["spec"]["spec"] if kind == "ResourceClaimTemplate" else doc["spec"]
        total += sum((r.get("exactly") or {}).get("count", 1) for r in spec["devices"]["requests"])
    return total


def test_a_dra_pod_counts_its_claimed_devices_and_sorts_by_them(ui_server: Any, page: Any) -> None:
    state = DemoState.lab(None)
    want = _dra_devices(state, "default/train-dra-b")
    assert want == 3, "two accelerators and a NIC"
    server = ui_server(state)
    open_page(page, server.url)
    item = page.locator('#pending .pending-item[data-key="default/train-dra-b"] .pi-devices')
    assert item.inner_text() == str(want)
    counts = [float(t) for t in texts(page, "#pending .pending-item .pi-devices")]
    assert counts == sorted(counts, reverse=True), "largest first"


def _free(server: Any, node: str) -> dict[str, int]:
    cluster = server.hub.run.session.cluster
    i = [n.name for n in cluster.nodes].index(node)
    out = {}
    for res, r in cluster.res_index.items():
        alloc = int(cluster.allocatable[r][i])
        if "/" in res and alloc:
            out[res] = alloc - int(cluster.requested[r][i])
    return out


def _drawer_free(page: Any, node: str) -> dict[str, str]:
    page.locator(f'.node-row[data-node="{node}"] .node-name').click()
    page.wait_for_function("(n) => document.querySelector('#node-panel')?.dataset.node === n", arg=node)
    rows = page.eval_on_selector_all(
        "#node-panel table.res tbody tr", "rs => rs.map(r => [r.cells[0].textContent, r.cells[3].textContent])"
    )
    return dict(rows)


def test_the_node_drawer_says_free_zero_and_counts_mig_instances(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    for node in ("node-a", "node-h"):
        want = _free(server, node)
        got = _drawer_free(page, node)
        assert want, node
        for res, n in want.items():
            assert got[res] == str(n), (node, res)
    assert _free(server, "node-a")["qualcomm.com/ai-accelerator"] == 0, "node-a is full: its 0 must show"
    # the map row of the MIG node: its free slices, and free instances by profile on hover
    devices = server.hub.run.session.cluster.devices
    part = next(d.partition for d in devices if d.partition and d.partition.mode == "mig")
    free = sum(part.free_units(d) for d in range(len(part.devices)))
    stats = page.locator('.node-row[data-node="node-h"] .node-stats')
    assert stats.locator(".split-free").inner_text() == f"{free}/{part.total_units} slices"
    assert f"1g.5gb {_free(server, 'node-h')['nvidia.com/mig-1g.5gb']}" in (stats.get_attribute("title") or "")


# ------------------------------------------------------------------------------------------------ capacity, what-if


def test_the_capacity_table_counts_physical_devices_with_mig_under_its_gpu(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    view = get_json(server.url + "api/state")
    physical: dict[str, int] = {}
    for n in view["nodes"]:
        for g in n["groups"]:
            for sw in g["switches"]:
                for c in sw["devices"]:
                    if c["kind"] != "dra":
                        physical[c["resource"]] = physical.get(c["resource"], 0) + 1
    rows = page.eval_on_selector_all(
        "#capacity-body table.device-types tr.physical",
        "rs => rs.map(r => [r.dataset.resource, r.cells[1].textContent])",
    )
    assert {k: int(v) for k, v in rows} == physical
    mig = page.eval_on_selector_all(
        '#capacity-body table.device-types tr.split[data-parent="nvidia.com/gpu"]',
        "rs => rs.map(r => [r.dataset.resource, r.cells[1].textContent])",
    )
    cluster = server.hub.run.session.cluster
    want = {
        res: int(cluster.allocatable[r].sum())
        for res, r in cluster.res_index.items()
        if res.startswith("nvidia.com/mig-") and cluster.allocatable[r].sum()
    }
    assert {k: int(v) for k, v in mig if k.startswith("nvidia.com/mig-")} == want


def _run_whatif(page: Any, node: str, op: str, taint: str = "") -> None:
    page.check(f'.node-row[data-node="{node}"] input.select-node')
    if taint:
        page.fill("#taint-text", taint)
    page.click(f'#whatif button[data-op="{op}"]')
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result .wi-summary")


def test_taint_evictions_are_listed_by_their_cause(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    taint = "x=y:NoExecute"
    expected = server.hub.whatif({"actions": [{"op": "taint", "nodes": ["node-a"], "taint": taint}]})
    assert expected["evicted"], "the taint evicts node-a's pods"
    open_page(page, server.url)
    _run_whatif(page, "node-a", "taint", taint)
    heading = text_of(page, "#whatif-result .evicted h4")
    assert "drain" not in heading
    got = page.eval_on_selector_all(
        "#whatif-result .evicted [data-cause]",
        "gs => gs.map(g => [g.dataset.cause, [...g.querySelectorAll('[data-pod]')].map(p => p.dataset.pod)])",
    )
    assert got == [[f"taint {taint}", [e["pod"] for e in expected["evicted"]]]]


def test_a_drain_does_not_raise_free_devices(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    held = len(server.hub.run.session.cluster.devices[0].pools["qualcomm.com/ai-accelerator"].ids)
    assert server.hub.run.session.cluster.nodes[0].name == "node-a" and held == 4
    open_page(page, server.url)
    _run_whatif(page, "node-a", "drain")
    rows = dict(
        (r[0], (int(r[1]), int(r[2])))
        for r in page.eval_on_selector_all(
            "#whatif-result table.compare tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))"
        )
    )
    today, after = rows["devices free"]
    assert after <= today, "node-a's devices, freed by the drain, are stranded by its cordon"
    s_today, s_after = rows["devices stranded"]
    assert s_after == s_today + held


def test_with_files_a_rack_drain_moves_only_pods_bound_in_the_input(ui_server: Any, page: Any, tmp_path: Path) -> None:
    """A generated -f cluster where the recreated pods have a controller: the page lists as moved only pods bound in
    the input, the pods the re-run queue put elsewhere apart, and the banner counts the nodes the drain changed."""
    from benchmarks.ui import generate

    cluster = generate(80)
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
    for pod in cluster.pods:
        if pod["spec"].get("nodeName"):
            pod["metadata"]["ownerReferences"] = owner
        else:
            pod["spec"].pop("nodeSelector", None)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*cluster.nodes, *cluster.pods]}))
    server = ui_server(FilesState.load([str(path)]))
    bound = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in cluster.pods if p["spec"].get("nodeName")}
    expected = server.hub.whatif(
        {"actions": [{"op": "drain", "nodes": {"label": "accelsched.io/rack", "value": "rack-000"}}]}
    )
    page.goto(server.url + "?group=accelsched.io/rack")
    wait_rendered(page)
    page.check('.group-row[data-group="rack-000"] input.select-group')
    page.click('#whatif button[data-op="drain"]')
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result .wi-summary")
    moved = page.eval_on_selector_all("#whatif-result .moved [data-pod]", "es => es.map(e => e.dataset.pod)")
    assert moved and set(moved) <= bound
    assert sorted(moved) == sorted(m["pod"] for m in expected["moved"])
    replaced = page.eval_on_selector_all("#whatif-result .replaced [data-pod]", "es => es.map(e => e.dataset.pod)")
    assert sorted(replaced) == sorted(m["pod"] for m in expected["replaced"]) and not set(replaced) & bound
    page.click("#whatif-map")
    banner = text_of(page, "#map-banner-text")
    assert f"{len(expected['changedNodes'])} nodes changed by the action" in banner


def test_three_pending_pods_picked_in_a_row_show_the_last_ones_explanation(
    ui_server: Any, page: Any, tmp_path: Path
) -> None:
    """3,000 nodes: three Pending pods picked 0.3 s apart. The page aborts the older explains (the server stops
    them), shows the last pod's explanation, and never a 429 (which the page watch would fail on as a console
    error)."""
    from benchmarks.ui import files_state, generate

    cluster = generate(3000)
    huge = [p for p in cluster.pods if p["metadata"]["name"].startswith("huge-")][:3]
    for k, pod in enumerate(huge):  # three shapes: three cards (identical replicas would fold into one)
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(k + 1)
    server = ui_server(files_state(cluster, tmp_path))
    open_page(page, server.url)
    keys = [f"bench/{p['metadata']['name']}" for p in huge]
    for key in keys:
        page.click(f'#pending .pending-item[data-key="{key}"] .pi-head')
        page.wait_for_timeout(300)
    page.wait_for_function("(k) => document.body.dataset.explain === k", arg=keys[-1], timeout=30_000)
    summary = text_of(page, f'#pending .pending-item[data-key="{keys[-1]}"] .pi-summary')
    assert summary.startswith("fits ") and "busy" not in summary
    assert page.locator("#pending .pi-summary .error").count() == 0
    want = server.hub.explain(keys[-1])
    feasible = sum(1 for v in want["nodes"] if v["feasible"])
    assert summary.startswith(f"fits {feasible} of {len(want['nodes'])} nodes")


def test_the_pending_list_at_5000_nodes_folds_replicas_caps_its_cards_searches_and_groups(
    ui_server: Any, page: Any, tmp_path: Path
) -> None:
    """5,000 nodes with 600 identical replicas of a ReplicaSet and 300 Pending pods of distinct shapes (for a node
    pool no node has): one card
    with a count for the replicas, 30 cards drawn at a time, under 2,000 DOM elements for the whole page; the filter
    box finds Pending pods, label keys and resource names; grouping by reason and namespace."""
    from benchmarks.ui import files_state, generate, pod_obj

    cluster = generate(5000)
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "u", "controller": True}]
    for k in range(600):
        pod = pod_obj(f"web-7d9f-{k:05d}", "team-a", 16)
        pod["metadata"]["ownerReferences"] = owner
        cluster.pods.append(pod)
    for k in range(300):
        cluster.pods.append(pod_obj(f"odd-{k:04d}", "team-b", 1, cpu=str(k + 1), selector={"pool": "none"}))
    server = ui_server(files_state(cluster, tmp_path))
    open_page(page, server.url)
    view = get_json(server.url + "api/state")
    pending = [e for e in view["pending"] if e["kind"] == "pod"]
    assert sum(1 for e in pending if e["key"].startswith("team-a/web-7d9f-")) == 600

    cards = page.locator("#pending .pending-item")
    assert cards.count() == 30, "30 cards drawn at a time"
    assert page.evaluate("document.querySelectorAll('*').length") < 2000, "the page's DOM budget at 5,000 nodes"
    web = page.locator('#pending .pending-item[data-kind="replicas"]', has_text="web-7d9f")
    assert web.locator(".pi-count").inner_text().strip() == "\u00d7600"
    assert len(web.get_attribute("data-pods").split()) == 600
    page.click("#pending [data-more]")
    assert cards.count() == 60

    # the filter box finds Pending pods (here: by owner), label keys and resource names
    page.fill("#node-filter", "web-7d9f")
    page.wait_for_function("() => document.querySelectorAll('#pending .pending-item').length === 1")
    assert text_of(page, "#pending .pending-found").startswith("600 pods in 1 card match")
    for query in ("accelsched.io/rack", "qualcomm.com/ai-accelerator"):
        page.fill("#node-filter", query)
        page.wait_for_timeout(400)
        assert page.locator("#map .node-row[data-node]").count() > 0, query
        assert page.locator("#map .map-empty").is_hidden(), query
    page.fill("#node-filter", "")
    page.wait_for_timeout(300)

    # grouping: by namespace the 300 odd pods are team-b's; by reason each card sits under the reason its message
    # blames on the most nodes
    page.select_option("#pending-group", "namespace")
    groups = page.eval_on_selector_all(
        "#pending .pending-group", "gs => gs.map(g => [g.dataset.group, g.querySelector('h3').textContent])"
    )
    assert ["team-a", " 600 pods"] in [[g, h.replace(g, "", 1)] for g, h in groups]
    assert any(g == "team-b" and h.endswith("300 pods") for g, h in groups)
    page.select_option("#pending-group", "reason")
    placed = page.eval_on_selector_all(
        "#pending .pending-group .pending-item",
        "is => is.map(i => [i.closest('.pending-group').dataset.group, i.querySelector('.message').textContent])",
    )
    assert placed and all(reason in message for reason, message in placed)
    assert placed[0][0] == "Insufficient qualcomm.com/ai-accelerator", "the reason that holds most pods first"


# ------------------------------------------------------------------------------------------------ extras


def test_dark_mode_follows_the_system(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    page.emulate_media(color_scheme="dark")
    open_page(page, server.url)

    def luminance(css: str) -> float:
        assert not css.startswith("rgba(0, 0, 0, 0)"), "an opaque colour"
        r, g, b = (int(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

    colours = page.evaluate(
        """() => { const s = (q, p) => getComputedStyle(document.querySelector(q))[p];
            return [s('html', 'backgroundColor'), s('body', 'color'), s('.node-row', 'backgroundColor'),
                    s('#pending-panel', 'backgroundColor')]; }"""
    )
    body, text, row, panel = (luminance(c) for c in colours)
    assert body < 0.2 and row < 0.2 and panel < 0.2 and text > 0.7, colours
    page.emulate_media(color_scheme="light")
    page.wait_for_timeout(100)
    assert luminance(page.evaluate("getComputedStyle(document.documentElement).backgroundColor")) > 0.8


def test_the_url_keeps_the_filter_and_the_open_node(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    page.fill("#node-filter", "node-h")
    page.wait_for_function("() => new URL(location.href).searchParams.get('q') === 'node-h'")
    page.locator('.node-row[data-node="node-h"] .node-name').click()
    page.wait_for_function("() => new URL(location.href).searchParams.get('node') === 'node-h'")
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    wait_rendered(page)
    page.wait_for_function("() => document.querySelector('#node-panel')?.dataset.node === 'node-h'")
    assert page.input_value("#node-filter") == "node-h"
    assert page.locator("#map .node-row[data-node]").count() == 1


def test_the_pending_list_and_a_whatif_export_as_csv_and_json(ui_server: Any, page: Any, tmp_path: Path) -> None:
    import csv

    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    pending = get_json(server.url + "api/state")["pending"]
    with page.expect_download() as got:
        page.click("#pending-csv")
    rows = list(csv.DictReader(Path(got.value.path()).read_text().splitlines()))
    pods = [(m["key"], m["message"]) for e in pending for m in (e["members"] if e["kind"] == "gang" else [e])]
    assert [(f"{r['namespace']}/{r['name']}", r["message"]) for r in rows] == pods
    with page.expect_download() as got:
        page.click("#pending-json")
    assert json.loads(Path(got.value.path()).read_text()) == pending

    body = {"actions": [{"op": "drain", "nodes": ["node-a"]}]}
    expected = server.hub.whatif(body)
    _run_whatif(page, "node-a", "drain")
    with page.expect_download() as got:
        page.click('#whatif-result [data-export="csv"]')
    rows = list(csv.DictReader(Path(got.value.path()).read_text().splitlines()))
    want = [(c, x["pod"]) for c in ("lost", "moved", "placed", "evicted", "replaced") for x in expected[c]]
    assert [(r["change"], r["pod"]) for r in rows] == want and want
    with page.expect_download() as got:
        page.click('#whatif-result [data-export="json"]')
    doc = json.loads(Path(got.value.path()).read_text())
    assert doc["lost"] == expected["lost"] and doc["evicted"] == expected["evicted"] and "nodes" not in doc


def test_the_map_shows_only_the_nodes_of_one_verdict(ui_server: Any, page: Any) -> None:
    """An explanation's filter, clicked, leaves on the map only the nodes it stops first; again, every node."""
    server = ui_server(DemoState.lab(None))
    pod = "default/train-16"
    verdicts = server.hub.explain(pod)["nodes"]
    by_filter: dict[str, list[str]] = {}
    for v in verdicts:
        if not v["feasible"]:
            by_filter.setdefault(v["filter"], []).append(v["node"])
    page.set_viewport_size({"width": 1400, "height": 4000})  # the map draws only the rows in view: show them all
    open_page(page, server.url)
    page.click(f'#pending .pending-item[data-key="{pod}"] .pi-head')
    page.wait_for_selector("#pending .pi-summary .fits")
    for name, nodes in by_filter.items():
        page.click(f'#pending .pi-summary [data-verdict="{name}"]')
        page.wait_for_timeout(150)
        shown = page.eval_on_selector_all("#map .node-row[data-node]", "rs => rs.map(r => r.dataset.node)")
        assert sorted(shown) == sorted(nodes), (name, sorted(set(shown) ^ set(nodes)))
        assert page.get_attribute(f'#pending .pi-summary [data-verdict="{name}"]', "aria-pressed") == "true"
    page.click(f'#pending .pi-summary [data-verdict="{name}"]')  # the last one again: every node
    page.wait_for_timeout(150)
    assert page.locator("#map .node-row[data-node]").count() == len(verdicts)


def test_the_history_is_drawn_once_a_state_is_published_again(ui_server: Any, page: Any) -> None:
    """A point per published version (live mode publishes on every burst of events): two more states published
    to the Hub reach the page, which draws allocation and Pending pods over the three."""
    from accelsched import demo

    lab = [str(demo.ROOT / "examples/lab/00-nodes.yaml"), str(demo.ROOT / "deploy/device-plugin-daemonset.yaml")]
    fill = [*lab, str(demo.ROOT / "examples/lab/06-fill.yaml"), str(demo.ROOT / "examples/lab/02-train-16.yaml")]
    server = ui_server(FilesState.load(lab))
    open_page(page, server.url)
    assert page.locator("#history").is_hidden(), "one version: nothing to draw"
    server.hub.publish(FilesState.load(fill))
    server.hub.publish(FilesState.load(lab))
    wait_rendered(page, 3)
    page.wait_for_function("() => document.querySelector('#history').dataset.points === '3'")
    assert page.locator("#history").is_visible()
    series = page.eval_on_selector_all("#history-alloc path.series-line", "ps => ps.map(p => p.dataset.series)")
    assert series == ["used", "stranded"]
    points = server.hub.history.points()
    assert [p["version"] for p in points] == [1, 2, 3] and points[1]["used"] > points[0]["used"]
    pending = page.eval_on_selector_all("#history-pending path.series-line", "ps => ps.map(p => p.dataset.series)")
    assert pending[0] == "all" and pending[1:] == list(points[-1]["pendingByReason"])[:3]


def test_colour_by_namespace_gives_each_of_21_namespaces_its_own_colour(
    ui_server: Any, page: Any, tmp_path: Path
) -> None:
    from benchmarks.ui import node_obj, pod_obj

    nodes = [node_obj(i) for i in range(21)]
    pods = [pod_obj(f"job-{k}", f"team-{k:02d}", 2, node=nodes[k]["metadata"]["name"]) for k in range(21)]
    path = tmp_path / "teams.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods]}))
    server = ui_server(FilesState.load([str(path)]))
    page.goto(server.url + "?color=namespace&group=none")
    wait_rendered(page)
    page.wait_for_selector("#map .node-row[data-node]")
    colours = page.eval_on_selector_all(
        "#map .cell[data-holder]:not([data-holder=''])",
        "cs => cs.map(c => [c.dataset.holder.split('/')[0], [...c.classList].find(k => /^c\\d+$/.test(k))])",
    )
    by_namespace: dict[str, set[str]] = {}
    for namespace, colour in colours:
        by_namespace.setdefault(namespace, set()).add(colour)
    assert len(by_namespace) == 21 and all(len(c) == 1 for c in by_namespace.values())
    assert len({next(iter(c)) for c in by_namespace.values()}) == 21, "21 namespaces, 21 colours"


def test_the_map_by_keyboard_and_by_its_accessibility_tree(ui_server: Any, page: Any) -> None:
    """Tab reaches the map's first cell; arrows move along a row and down to the next; a focused cell shows its
    tooltip and marks every cell of its holder; each cell's accessible name says its holder (Playwright's
    accessibility tree), so a holder is more than a colour."""
    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    page.focus("#map")
    active = "() => { const a = document.activeElement; return a && a.classList.contains('cell') ? {device:"
    active += " a.dataset.device || a.dataset.nic, holder: a.dataset.holder || '', label: a.getAttribute('aria-label'),"
    active += " row: a.closest('.node-row').dataset.node} : null; }"
    first = page.evaluate(active)
    assert first is not None, "the map hands focus to its first cell"
    seen = [first]
    for _ in range(6):
        page.keyboard.press("ArrowRight")
        seen.append(page.evaluate(active))
    assert len({s["device"] for s in seen}) > 1 and {s["row"] for s in seen} == {first["row"]}
    held = next(s for s in seen if s["holder"])
    page.focus(f'#map .cell[data-device="{held["device"]}"]')
    page.locator("#tooltip").wait_for(state="visible")
    page.wait_for_selector('#tooltip [data-field="holder"]')
    assert text_of(page, '#tooltip [data-field="holder"]') == held["holder"]
    drawn = page.eval_on_selector_all(
        "#map .cell",
        "cs => cs.filter(c => (c.dataset.holders || c.dataset.holder || '').split(' ')"
        f".includes({json.dumps(held['holder'])})).length",
    )
    assert page.locator("#map .cell.same-holder").count() == drawn > 0
    assert held["holder"] in held["label"]
    assert page.get_by_role("gridcell", name=held["holder"]).count() == drawn  # the accessible names
    page.keyboard.press("ArrowDown")
    below = page.evaluate(active)
    assert below is not None and below["row"] != first["row"]


def test_the_url_keeps_the_whatif_actions_and_runs_them_again(ui_server: Any, page: Any) -> None:
    server = ui_server(DemoState.lab(None))
    expected = server.hub.whatif({"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    open_page(page, server.url)
    _run_whatif(page, "node-a", "drain")
    page.wait_for_function("() => new URL(location.href).searchParams.get('wi') !== null")
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    wait_rendered(page)
    page.wait_for_selector("#whatif-result .wi-summary")
    lost = page.eval_on_selector_all("#whatif-result .lost [data-pod]", "es => es.map(e => e.dataset.pod)")
    assert sorted(lost) == sorted(x["pod"] for x in expected["lost"]) and lost
    assert "drain node-a" in text_of(page, "#whatif-result .wi-ran")


def test_a_link_with_malformed_whatif_actions_stages_only_the_well_formed(ui_server: Any, page: Any) -> None:
    import urllib.parse

    server = ui_server(DemoState.lab(None))
    actions = [{"op": "cordon", "nodes": 3}, {"op": "drain", "nodes": ["node-a"]}, {"op": "taint", "nodes": ["x"]}]
    page.goto(server.url + "?wi=" + urllib.parse.quote(json.dumps(actions)))
    wait_rendered(page)
    page.wait_for_selector("#whatif-result .wi-summary")
    assert texts(page, "#whatif-actions li span") == ["drain node-a"]
    assert "malformed" in text_of(page, "#whatif-error")
