"""``accelsched ui`` in a real browser: the lab's map, hover and click, the Pending list, explain on the map,
what-if, escaping of hostile strings and the refusal of writes, checked against what the CLI prints.

Each test starts the real server (accelsched/ui/server.py, uvicorn on 127.0.0.1, a free port) over a real Hub and
drives Debian's Chromium through Playwright. The expected values never come from the page's own JSON alone: the map
is compared with ``accelsched schedule -o json`` run as a subprocess on the same files (and with the engine's
cluster after the run, which also knows the pods bound in the input), the highlights with ``accelsched explain -o
json``, the what-if with the same files scheduled again with node-a cordoned by hand.

Screenshots land under each test's tmp_path; with ACCELSCHED_UPDATE_SCREENSHOTS=1 the two README images are also
written to docs/img/ (small palette PNGs, at most 150 KB each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from browserkit import collect_map, holders, physical, small_png, text_of, texts, wait_rendered, xss_marks
from click.testing import CliRunner

from accelsched import demo, report
from accelsched.errors import InputError
from accelsched.explain import Explainer
from accelsched.framework import gang
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION
from accelsched.ui.state import DemoState, FilesState, execute

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOCS_IMG = REPO / "docs" / "img"
UPDATE_SCREENSHOTS = os.environ.get("ACCELSCHED_UPDATE_SCREENSHOTS") == "1"
XSS = "<img src=x onerror=alert(1)>"
WHATIF_SENTENCE = "What-if only: nothing is written to the cluster."

# The lab's files as one `schedule -f` input: every step's YAML except step 4's, which re-declares node-b cordoned
# (kubectl apply replaces; `schedule -f` refuses a duplicate). DemoState.lab plays the steps themselves.
LAB_FILES = [str(demo.ROOT / f) for s in demo.LAB_STEPS for f in s.files if not f.endswith("04-cordon-node-b.yaml")]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The accelsched CLI as a user runs it (a subprocess of this interpreter's package)."""
    return subprocess.run(
        [sys.executable, "-m", "accelsched.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def cli_json(*args: str) -> Any:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def files_args(files: list[str]) -> list[str]:
    return [a for f in files for a in ("-f", f)]


@pytest.fixture(scope="module")
def lab_schedule() -> dict[str, Any]:
    return cli_json("schedule", *files_args(LAB_FILES), "-o", "json")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def engine_holders(run: Any) -> dict[str, set[str]]:
    """Device ("NODE/ID") -> the pods holding it after the run, from the engine's cluster: pods bound in the input and
    pods placed by the run, extended-resource devices by their physical id and DRA devices by name."""
    out: dict[str, set[str]] = defaultdict(set)
    cluster = run.session.cluster
    for i, node in enumerate(cluster.nodes):
        for key, pod in cluster.pods_on[i].items():
            for ids in pod.devices.values():
                for d in ids:
                    out[f"{node.name}/{physical(d)}"].add(key)
    return out


def dra_holders(schedule: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for p in schedule["pods"]:
        for claim in p.get("claims") or []:
            for r in claim.get("results") or []:
                if p["node"]:
                    out[f"{p['node']}/{r['device']}"].add(f"{p['namespace']}/{p['name']}")
    return out


def view_cells(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for n in view["nodes"]:
        for g in n["groups"]:
            for sw in g["switches"]:
                for c in sw["devices"]:
                    out[f"{n['name']}/{c['id']}"] = c
    return out


def open_page(page: Any, url: str) -> int:
    page.goto(url)
    version = wait_rendered(page)
    page.wait_for_selector("#map .node-row[data-node]")
    return version


def check_map(page: Any, url: str, run: Any, schedule: dict[str, Any] | None) -> dict[str, Any]:
    """The page's map against the engine's run (and ``schedule -o json`` when given): every node, every device
    cell the view has, each with exactly the pods the engine says hold it."""
    open_page(page, url)
    dom = collect_map(page)
    view = get_json(url + "api/state")
    names = [n.name for n in run.session.cluster.nodes]
    assert sorted(dom["nodes"]) == sorted(names)
    if schedule is not None:
        assert sorted(dom["nodes"]) == sorted(n["name"] for n in schedule["nodes"])
    cells = view_cells(view)
    assert sorted(dom["cells"]) == sorted(cells), "the map draws every device cell of the view, no other"
    expected = engine_holders(run)
    # DRA devices: the claims' allocations of schedule -o json (the same contract from the run when not given)
    dra = dra_holders(schedule if schedule is not None else report.to_json(run.results, run.session.cluster))
    if schedule is not None:
        # schedule -o json's placed pods agree with the engine's cluster (bound input pods are only in the latter)
        for p in schedule["pods"]:
            if not p["node"]:
                continue
            key = f"{p['namespace']}/{p['name']}"
            for ids in p["devices"].values():
                for d in ids:
                    assert key in expected[f"{p['node']}/{physical(d)}"], (key, d)
    drawn = set(dom["cells"]) | set(dom["nics"])
    for device, pods in [*expected.items(), *dra.items()]:
        assert device in drawn, f"{device} (held by {sorted(pods)}) is not on the map"
    wrong = {}
    for device, cell in dom["cells"].items():
        want = expected.get(device, set()) | dra.get(device, set())
        if holders(cell) != want:
            wrong[device] = (sorted(holders(cell)), sorted(want))
        if cell["kind"] == "mig":
            assert {h for h in cell["slots"] if h} <= want, device
        assert cell["kind"] == cells[device]["kind"]
    assert not wrong, f"cells whose holders differ (page, engine): {wrong}"
    # plain devices: one cell per allocatable device of the resource
    per: dict[tuple[str, str], int] = defaultdict(int)
    for device, c in cells.items():
        if c["kind"] == "device":
            per[(device.split("/", 1)[0], c["resource"])] += 1
    for n in view["nodes"]:
        for res, qty in n["allocatable"].items():
            if (n["name"], res) in per:
                assert per[(n["name"], res)] == int(qty), (n["name"], res)
    held = sum(1 for c in dom["cells"].values() if holders(c))
    assert held >= 10, "the lab holds many devices"
    return {"dom": dom, "view": view}


def test_lab_demo_map_shows_every_node_and_device_with_its_holder(ui_server: Any, page: Any) -> None:
    state = DemoState.lab(None)
    server = ui_server(state)
    result = check_map(page, server.url, server.hub.run, None)
    # the demo's step 4 cordoned node-b, and node-c carries the maintenance taint
    nodes = result["dom"]["nodes"]
    assert nodes["node-b"]["cordoned"] is True
    assert "maintenance=true:NoSchedule" in nodes["node-c"]["taints"]
    assert result["view"]["mode"] == "demo"
    # an independent run over the same state agrees with the hub's (the engine is deterministic for a seed)
    again = execute(state.copy())
    assert engine_holders(again) == engine_holders(server.hub.run)


def test_files_map_matches_schedule_json(ui_server: Any, page: Any, lab_schedule: dict[str, Any]) -> None:
    server = ui_server(FilesState.load(LAB_FILES))
    result = check_map(page, server.url, server.hub.run, lab_schedule)
    assert result["view"]["mode"] == "offline"
    assert text_of(page, "#status")  # mode, source, version


def test_hover_shows_the_pod_and_click_opens_it(ui_server: Any, page: Any, lab_schedule: dict[str, Any]) -> None:
    """train-nic: 4 cards beside its NIC on NUMA node 0 of node-e (the lab's topology step)."""
    server = ui_server(FilesState.load(LAB_FILES))
    open_page(page, server.url)
    placed = next(p for p in lab_schedule["pods"] if p["name"] == "train-nic")
    key = f"{placed['namespace']}/{placed['name']}"
    annotations = server.hub.run.result(key).pod.raw["metadata"]["annotations"]
    numa, nic = annotations[NUMA_ANNOTATION], annotations[NIC_ANNOTATION]
    device = placed["devices"]["qualcomm.com/ai-accelerator"][0]
    cell = page.locator(f'.cell[data-device="{placed["node"]}/{device}"]')
    assert cell.get_attribute("data-holder") == key
    cell.hover()
    page.locator("#tooltip").wait_for(state="visible")
    page.wait_for_selector('#tooltip [data-field="alignment"]')
    assert text_of(page, '#tooltip [data-field="holder"]') == key
    assert "ai-accelerator 4" in text_of(page, '#tooltip [data-field="requests"]')
    alignment = text_of(page, '#tooltip [data-field="alignment"]')
    assert f"NUMA {numa}" in alignment and f"NIC {nic}" in alignment
    # the NIC it was aligned with names it too
    assert key in (page.get_attribute(f'.cell.nic[data-nic="{placed["node"]}/{nic}"]', "data-holders") or "").split()
    cell.click()
    panel = page.locator("#pod-panel")
    panel.wait_for(state="visible")
    page.wait_for_function(
        "(n) => { const f = document.querySelector('#pod-panel [data-field=\"node\"]');"
        " return f && f.textContent.trim() === n; }",
        arg=placed["node"],
    )
    assert text_of(page, '#pod-panel [data-field="phase"]') == "Placed"
    assert placed["name"] in panel.text_content()
    for d in placed["devices"]["qualcomm.com/ai-accelerator"]:
        assert d in panel.text_content()
    # moving off the map hides the tooltip
    page.mouse.move(2, 2)
    page.locator("#tooltip").wait_for(state="hidden")


def expected_pending(schedule: dict[str, Any], run: Any) -> dict[str, dict[str, Any]]:
    """schedule -o json's pods without a node, a gang's members under its group key."""
    pods = {p.key: p for p in run.session.inputs.pods}
    out: dict[str, dict[str, Any]] = {}
    for p in schedule["pods"]:
        if p["node"]:
            continue
        key = f"{p['namespace']}/{p['name']}"
        group = gang.group_key(pods[key])
        if group is None:
            out[key] = {"kind": "pod", "messages": [p["message"]], "members": []}
        else:
            entry = out.setdefault(group, {"kind": "gang", "messages": [], "members": []})
            entry["messages"].append(p["message"])
            entry["members"].append(key)
    return out


def test_pending_list_matches_schedule_json(ui_server: Any, page: Any, lab_schedule: dict[str, Any]) -> None:
    server = ui_server(FilesState.load(LAB_FILES))
    open_page(page, server.url)
    page.wait_for_selector("#pending .pending-item")
    expected = expected_pending(lab_schedule, server.hub.run)
    items = page.eval_on_selector_all(
        "#pending .pending-item",
        """els => els.map(e => ({key: e.dataset.key, kind: e.dataset.kind, pods: e.dataset.pods.split(' '),
            message: e.querySelector(':scope > .message').textContent,
            members: [...e.querySelectorAll('.member[data-key]')].map(m => m.dataset.key)}))""",
    )
    # a card per gang, per pod, or per set of identical replicas (one message for all of them)
    shown = [p for i in items for p in (i["pods"] if i["kind"] == "replicas" else [i["key"]])]
    assert sorted(shown) == sorted(expected)
    assert len(shown) == len(expected), "every pending pod or gang once"
    assert any(e["kind"] == "gang" for e in expected.values()), "the lab has a waiting gang (train-b)"
    assert any(i["kind"] == "replicas" for i in items), "the lab's chat-whole replicas fold into one card"
    for item in items:
        for key in item["pods"] if item["kind"] == "replicas" else [item["key"]]:
            want = expected[key]
            assert item["kind"] == want["kind"] or (item["kind"] == "replicas" and want["kind"] == "pod"), key
            if want["kind"] == "pod":
                assert item["message"] == want["messages"][0], key
            else:
                assert sorted(item["members"]) == sorted(want["members"]), key
                assert item["message"] in want["messages"], key
    # largest first: the page keeps the order the server sorted (devices desc, cpu desc, key)
    view = get_json(server.url + "api/state")
    order = [e["key"] for e in view["pending"]]
    assert [i["key"] for i in items] == [k for k in order if k in {i["key"] for i in items}]


def select_pending(page: Any, key: str) -> None:
    page.click(f'#pending .pending-item[data-key="{key}"]')
    page.wait_for_function(
        "() => document.querySelectorAll('#map .node-row[data-feasible]').length > 0"
        " && document.querySelector('#pending .pending-item.selected .pi-summary .fits') !== null"
    )


@pytest.mark.parametrize("pod", ["default/infer-b", "default/train-16"])
def test_selected_pending_pod_highlights_first_failing_filter(
    ui_server: Any, page: Any, tmp_path: Path, pod: str
) -> None:
    explained = cli_json("explain", pod, *files_args(LAB_FILES), "-o", "json")
    server = ui_server(FilesState.load(LAB_FILES))
    open_page(page, server.url)
    select_pending(page, pod)
    dom = collect_map(page)["nodes"]
    for v in explained["nodes"]:
        row = dom[v["node"]]
        if v["feasible"]:
            assert row["feasible"] == "true", v["node"]
        else:
            assert row["feasible"] == "false", v["node"]
            assert row["filter"] == v["filter"], v["node"]
            assert row["badge"] == v["filter"], v["node"]
    # a node's facts and remedies: the first with a remedy (or with details), explained on the final state of an
    # independent run (the map's state; the CLI explains the pod's last attempt during the run, before later pods
    # filled some nodes further: the same failing filters, as checked above)
    run = execute(FilesState.load(LAB_FILES))
    result = run.result(pod)
    explainer = Explainer(run.session.scheduler, {pod})
    explainer.observe(result.pod)
    final = explainer.explanation(result.pod, result).to_json()
    assert [(v["node"], v.get("filter")) for v in final["nodes"]] == [
        (v["node"], v.get("filter")) for v in explained["nodes"]
    ]
    verdict = next((v for v in final["nodes"] if v["remedies"]), None) or next(
        v for v in final["nodes"] if v["details"]
    )
    page.locator(f'.node-row[data-node="{verdict["node"]}"] .node-name').click()
    panel = page.locator("#node-panel")
    panel.wait_for(state="visible")
    page.wait_for_selector("#node-panel .detail")
    assert texts(page, "#node-panel .detail") == verdict["details"]
    assert texts(page, "#node-panel .remedy") == verdict["remedies"]
    if pod == "default/infer-b":
        assert next(v for v in final["nodes"] if v["node"] == "node-c")["filter"] == "TaintToleration"
        page.screenshot(path=str(tmp_path / "map-pending-selected.png"), full_page=True)


def test_a_dra_pods_node_panel_shows_the_device_funnel(ui_server: Any, page: Any) -> None:
    """The demo's train-dra-b on node-p: explain's per-request funnel as a table, equal to its JSON."""
    server = ui_server(DemoState.lab(None))
    explained = server.hub.explain("default/train-dra-b")
    (verdict,) = [v for v in explained["nodes"] if v["node"] == "node-p"]
    open_page(page, server.url)
    select_pending(page, "default/train-dra-b")
    page.locator('.node-row[data-node="node-p"] .node-name').click()
    page.wait_for_selector("#node-panel .funnel")
    for claim in verdict["claims"]:
        row = page.locator(f'#node-panel .funnel tr[data-request="{claim["request"]}"] td')
        held = sum(claim["allocated"].values())
        want = [str(claim["needed"]), str(claim["nodeDevices"]), str(claim["ofClass"]), str(claim["matching"]),
                str(held), str(len(claim["free"]))]  # fmt: skip
        assert row.all_inner_texts() == want, claim["request"]
    # the NIC is the request short on this node: its free count is marked
    assert page.locator('#node-panel .funnel tr[data-request="nic"] td.bad').inner_text() == "0"


def readme_screenshot(page: Any, dest: Path, focus: str) -> int:
    """A 1440x900 view of the page with ``focus`` in sight and no drawer open, as a small PNG (the README's)."""
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.locator(focus).first.scroll_into_view_if_needed()
    page.wait_for_timeout(300)  # the virtualized map draws the rows now in view
    return small_png(page.screenshot(), dest)


def test_screenshots_of_the_demo(ui_server: Any, page: Any, tmp_path: Path) -> None:
    """The lab as ``accelsched ui --demo`` shows it: a Pending pod selected on the map, then a what-if drain of
    node-a (in the demo its pods were bound by earlier steps, so a cordon alone moves nothing). Saved under
    tmp_path; with ACCELSCHED_UPDATE_SCREENSHOTS=1 also as docs/img/ui-map.png and docs/img/ui-whatif.png (the
    README's)."""
    server = ui_server(DemoState.lab(None))
    open_page(page, server.url)
    select_pending(page, "default/infer-b")
    assert page.get_attribute('.node-row[data-node="node-c"]', "data-filter") == "TaintToleration"
    page.screenshot(path=str(tmp_path / "demo-map-pending-selected.png"), full_page=True)
    out = DOCS_IMG if UPDATE_SCREENSHOTS else tmp_path
    assert readme_screenshot(page, out / "ui-map.png", "#map") <= 150_000
    expected = server.hub.whatif({"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    assert expected["lost"], "draining node-a in the demo leaves pods without a place"
    page.check('.node-row[data-node="node-a"] input.select-node')
    page.click('#whatif button[data-op="drain"]')
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result .lost [data-pod]")
    lost = page.eval_on_selector_all("#whatif-result .lost [data-pod]", "es => es.map(e => e.dataset.pod)")
    assert sorted(lost) == sorted(x["pod"] for x in expected["lost"])
    page.screenshot(path=str(tmp_path / "demo-whatif-result.png"), full_page=True)
    assert readme_screenshot(page, out / "ui-whatif.png", "#whatif-result") <= 150_000


def placements(run: Any) -> dict[str, str | None]:
    return run.placements()


def test_whatif_cordon_node_a_shows_the_pods_that_lose_their_place(ui_server: Any, page: Any, tmp_path: Path) -> None:
    state = FilesState.load(LAB_FILES)
    server = ui_server(state)
    # by hand: the same files with node-a cordoned, scheduled again
    nodes = [dict(n) for n in state.copy().nodes()]
    for n in nodes:
        if n["metadata"]["name"] == "node-a":
            n["spec"] = {**(n.get("spec") or {}), "unschedulable": True}
    cordoned = execute(state.copy().replace(nodes, state.copy().pods()))
    before, after = placements(server.hub.run), placements(cordoned)
    lost = sorted(k for k, n in before.items() if n and not after.get(k))
    # a move is of a pod bound in the input; one the run placed and the re-run placed elsewhere is listed apart
    bound = {f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}" for p in state.pods()
             if p["spec"].get("nodeName")}  # fmt: skip
    moved = sorted(k for k, n in before.items() if n and after.get(k) and after[k] != n and k in bound)
    replaced = sorted(k for k, n in before.items() if n and after.get(k) and after[k] != n and k not in bound)
    assert lost, "cordoning node-a must leave a pod without a place in the lab"
    hub = server.hub.whatif({"actions": [{"op": "cordon", "nodes": ["node-a"]}]})
    assert sorted(x["pod"] for x in hub["lost"]) == lost
    assert sorted(x["pod"] for x in hub["moved"]) == moved
    assert sorted(x["pod"] for x in hub["replaced"]) == replaced

    open_page(page, server.url)
    assert WHATIF_SENTENCE in text_of(page, "#whatif")
    page.check('.node-row[data-node="node-a"] input.select-node')
    page.click('#whatif button[data-op="cordon"]')
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-result .lost [data-pod], #whatif-result .moved [data-pod]")
    page_lost = sorted(page.eval_on_selector_all("#whatif-result .lost [data-pod]", "es => es.map(e => e.dataset.pod)"))
    page_moved = sorted(
        page.eval_on_selector_all("#whatif-result .moved [data-pod]", "es => es.map(e => e.dataset.pod)")
    )
    assert page_lost == lost
    assert page_moved == moved
    page_replaced = page.eval_on_selector_all("#whatif-result .replaced [data-pod]", "es => es.map(e => e.dataset.pod)")
    assert sorted(page_replaced) == replaced
    assert WHATIF_SENTENCE in text_of(page, "#whatif-result") or WHATIF_SENTENCE in text_of(page, "#whatif")
    assert page.locator(f"#whatif :text('{WHATIF_SENTENCE}')").first.is_visible()
    # the page's own state did not change: same version, node-a not cordoned on the map
    assert get_json(server.url + "api/state")["version"] == server.hub.version == 1
    page.locator("#whatif-result").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "whatif-result.png"), full_page=True)


# ------------------------------------------------------------------------------------------------ hostile strings


def _pod_doc(name: str, annotations: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/x:1",
                "resources": {
                    "requests": {"cpu": "1", "qualcomm.com/ai-accelerator": "1"},
                    "limits": {"qualcomm.com/ai-accelerator": "1"},
                },
            }
        ]
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_a_pod_named_with_markup_is_refused_by_the_loader(tmp_path: Path) -> None:
    """The API server refuses such a name (DNS-1123); so does accelsched, with exit 2 and the field named."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_pod_doc(XSS)))
    nodes = str(demo.ROOT / "examples/lab/00-nodes.yaml")
    from accelsched.cli import main

    result = CliRunner().invoke(main, ["schedule", "-f", nodes, "-f", str(bad)])
    assert result.exit_code == 2, result.output
    assert "metadata.name" in result.output
    proc = cli("ui", "-f", nodes, "-f", str(bad), "--once")
    assert proc.returncode == 2 and "metadata.name" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(InputError):
        FilesState.load([nodes, str(bad)])


def test_deep_link_with_markup_shows_it_as_text(ui_server: Any, page: Any, page_watch: Any) -> None:
    page_watch.allow(r"Failed to load resource: the server responded with a status of 404")
    server = ui_server(FilesState.load(LAB_FILES))
    page.goto(server.url + "?pod=" + urllib.parse.quote(XSS))
    wait_rendered(page)
    page.wait_for_function("(s) => document.body.innerText.includes('no pod ' + s)", arg=XSS)
    page.wait_for_timeout(300)
    assert xss_marks(page) == []
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"], [onerror]').length") == 0
    # the explain endpoint's error names the pod in JSON, never as a page the browser would render
    got = page.evaluate(
        """async (s) => { const r = await fetch('/api/explain?pod=' + encodeURIComponent(s));
            return {status: r.status, type: r.headers.get('content-type'), body: await r.json()}; }""",
        XSS,
    )
    assert got["status"] == 404 and got["type"].startswith("application/json")
    assert XSS in got["body"]["error"]


def test_markup_in_annotations_and_taint_text_stays_text(
    ui_server: Any, page: Any, page_watch: Any, tmp_path: Path
) -> None:
    page_watch.allow(r"Failed to load resource: the server responded with a status of 400")
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(yaml.safe_dump(_pod_doc("annotated", {"note": XSS, "accelsched.io/x": XSS}, node="node-d")))
    server = ui_server(FilesState.load([str(demo.ROOT / "examples/lab/00-nodes.yaml"), str(hostile)]))
    open_page(page, server.url)
    placed = server.hub.run.result("default/annotated")
    assert placed is not None and placed.node == "node-d"
    device = placed.devices["qualcomm.com/ai-accelerator"][0]
    page.click(f'.cell[data-device="node-d/{device}"]')
    page.locator("#pod-panel").wait_for(state="visible")
    page.wait_for_function("(s) => document.querySelector('#pod-panel').textContent.includes(s)", arg=XSS)
    page.keyboard.press("Escape")  # the drawer covers the what-if panel
    page.locator("#pod-panel").wait_for(state="hidden")
    # a what-if taint whose text is markup: refused (by the page, before staging: it is no key=value:Effect) with a
    # message that shows the text as text
    page.check('.node-row[data-node="node-a"] input.select-node')
    page.fill("#taint-text", XSS)
    page.click('#whatif button[data-op="taint"]')
    assert page.locator("#whatif-actions li").count() == 0, "a malformed taint is never staged"
    error = page.locator("#whatif-error")
    error.wait_for(state="visible")
    assert "taint" in error.text_content()
    assert XSS in error.text_content(), "the refused text is shown as text"
    page.wait_for_timeout(300)
    assert xss_marks(page) == []
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"], [onerror]').length") == 0


def test_the_server_refuses_writes_from_the_page(ui_server: Any, page: Any, page_watch: Any) -> None:
    page_watch.allow(r"Failed to load resource: the server responded with a status of 4\d\d")
    server = ui_server(FilesState.load(LAB_FILES))
    open_page(page, server.url)
    got = page.evaluate(
        """async () => {
            const out = {};
            for (const [m, path] of [['PUT', '/api/state'], ['DELETE', '/api/state'], ['PATCH', '/api/pod'],
                                     ['POST', '/api/state'], ['PUT', '/api/whatif'], ['DELETE', '/']]) {
                const r = await fetch(path, {method: m, headers: {'Content-Type': 'application/json'}, body:
                    m === 'DELETE' ? undefined : '{}'});
                out[m + ' ' + path] = {status: r.status, body: await r.json()};
            }
            const t = await fetch('/api/whatif', {method: 'POST', headers: {'Content-Type': 'text/plain'},
                body: '{"actions": []}'});
            out['POST text/plain'] = {status: t.status};
            return out;
        }"""
    )
    for what, r in got.items():
        if what == "POST text/plain":
            assert r["status"] in (400, 415), r
            continue
        assert r["status"] == 405, (what, r)
        assert "read-only" in r["body"]["error"], (what, r)
    assert server.hub.version == 1
