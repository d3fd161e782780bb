"""accelsched ui's states, runs and Hub over the real engine: the files and the demo as the CLI and demo see them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelsched import report
from accelsched.cli import main
from accelsched.demo import LAB_STEPS, play
from accelsched.engine import schedule
from accelsched.errors import InputError
from accelsched.ui.hub import Busy, Hub, Superseded
from accelsched.ui.state import DemoState, FilesState, RawState, Run, clone, execute

ROOT = Path(__file__).resolve().parent.parent
LAB = [str(ROOT / p) for p in ("examples/lab/00-nodes.yaml", "deploy/device-plugin-daemonset.yaml")]
FILL = [*LAB, str(ROOT / "examples/lab/06-fill.yaml"), str(ROOT / "examples/lab/03-maintenance.yaml")]
# Every step's files of the lab but step 4's (it re-declares node-b, which `schedule -f` refuses as a duplicate).
LAB_FILES_ALL = [
    *LAB,
    *(str(ROOT / f"examples/lab/{n}.yaml") for n in ("02-train-16", "06-fill", "07-topology", "08-fractional")),
    *(str(ROOT / f"examples/lab/{n}.yaml") for n in ("09-gangs", "10-preemption", "03-maintenance")),
    *sorted(str(p) for p in (ROOT / "examples/lab").glob("11-dra-*.yaml")),
]


def as_json(run_or_session, results=None):
    if results is None:
        return report.to_json(run_or_session.results, run_or_session.session.cluster)
    return report.to_json(results, run_or_session.cluster)


def dump(value) -> str:
    return json.dumps(value, sort_keys=True)


@pytest.fixture(scope="module")
def outcomes():
    return list(play())


@pytest.mark.parametrize("files", [LAB, FILL, [*LAB, str(ROOT / "examples/lab/07-topology.yaml")]])
def test_files_state_runs_like_schedule(files):
    state = FilesState.load(files)
    session, results = schedule(files)
    first = execute(state)
    assert as_json(first) == as_json(session, results)
    assert as_json(execute(state)) == as_json(first)  # a run never mutates the state it starts from
    assert state.mode == "offline" and state.description.startswith("files: ")


def test_a_run_leaves_the_state_dicts_alone():
    state = FilesState.load(FILL)
    before = dump([d.doc for d in state.docs])
    run = execute(state)
    assert any(r.node for r in run.results)
    assert dump([d.doc for d in state.docs]) == before


def test_files_state_refuses_what_schedule_refuses(tmp_path):
    with pytest.raises(InputError, match="duplicate object"):
        FilesState.load([*LAB, str(ROOT / "examples/lab/04-cordon-node-b.yaml")])  # node-b again
    with pytest.raises(InputError, match="cannot read"):
        FilesState.load([str(tmp_path / "missing.yaml")])
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: c}]}\n")
    with pytest.raises(InputError) as exc:
        FilesState.load([str(bad)])
    cli = CliRunner().invoke(main, ["schedule", "-f", str(bad)])
    assert cli.exit_code == 2 and str(exc.value) in cli.output
    with pytest.raises(InputError):
        FilesState.load([])


SHORT_GANG = """
apiVersion: v1
kind: List
items:
  - {apiVersion: scheduling.x-k8s.io/v1alpha1, kind: PodGroup, metadata: {name: g, namespace: default},
     spec: {minMember: 3}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: g-0, namespace: default, labels: {scheduling.x-k8s.io/pod-group: g}}
    spec: {nodeName: node-a, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"""


def test_a_gang_short_of_min_member_is_read_as_schedule_reads_it(tmp_path):
    """Fewer pods than minMember is valid input (issue 28: more may come), in files as after a what-if drain."""
    short = tmp_path / "short.yaml"
    short.write_text(SHORT_GANG)
    state = FilesState.load([*LAB, str(short)])
    assert "default/g" in execute(state).session.inputs.pod_groups
    cli = CliRunner().invoke(main, ["schedule", *(a for f in [*LAB, str(short)] for a in ("-f", f))])
    assert cli.exit_code == 0, cli.output


def test_demo_state_is_the_demo_after_each_step(outcomes):
    for n, outcome in enumerate(outcomes, start=1):
        run = execute(DemoState.lab(n))
        assert as_json(run) == as_json(outcome.session, outcome.results), f"step {n}"
    every = DemoState.lab(None)
    assert as_json(execute(every)) == as_json(outcomes[-1].session, outcomes[-1].results)
    assert every.mode == "demo" and DemoState.lab(3).description == "demo: the lab after step 3"
    with pytest.raises(InputError, match="--step"):
        DemoState.lab(len(LAB_STEPS) + 1)


def test_copy_and_replace_keep_places():
    state = FilesState.load(FILL)
    copy = state.copy()
    nodes, pods = copy.nodes(), copy.pods()
    assert [n["metadata"]["name"] for n in nodes] == ["node-a", "node-b", "node-c", "node-d"]
    nodes[0]["spec"]["unschedulable"] = True
    assert "unschedulable" not in state.nodes()[0]["spec"]  # a copy is deep
    swapped = copy.replace(list(reversed(nodes)), pods[1:])
    assert [n["metadata"]["name"] for n in swapped.nodes()] == ["node-a", "node-b", "node-c", "node-d"]
    assert len(swapped.pods()) == len(state.pods()) - 1
    assert isinstance(swapped, FilesState) and isinstance(swapped, RawState)


def test_hub_versions_and_deltas():
    hub = Hub(FilesState.load(LAB))
    assert hub.version == 1
    full = hub.view()
    assert full["version"] == 1 and full["mode"] == "offline" and full["readOnly"] is True
    assert full["source"].startswith("files: ")
    assert hub.view(since=0) == full  # no previous view: the full one
    assert hub.last_run_seconds > 0

    hub.publish(FilesState.load(FILL))
    assert hub.version == 2
    delta = hub.view(since=1)
    assert delta["delta"] is True and delta["version"] == 2 and delta["removed"] == []
    changed = {n["name"] for n in delta["nodes"]}
    previous = {n["name"]: n["etag"] for n in full["nodes"]}
    current = {n["name"]: n for n in hub.view()["nodes"]}
    assert changed == {name for name, n in current.items() if previous[name] != n["etag"]}
    assert "node-a" in changed  # train-3b landed there
    for key in ("order", "pending", "capacity", "counts", "gangs"):
        assert delta[key] == hub.view()[key]
    assert hub.view(since=7)["nodes"] == hub.view()["nodes"]  # any other version: the full view
    assert "delta" not in hub.view(since=7)

    # A node gone: named in removed.
    state = FilesState.load(LAB)
    hub.publish(state.replace(state.nodes()[:3], state.pods()))
    assert hub.view(since=2)["removed"] == ["node-d"]


def test_hub_wait_wakes_on_publish():
    hub = Hub(FilesState.load(LAB))
    began = time.monotonic()
    assert hub.wait(1, 0.05) == 1  # nothing new: the timeout
    assert time.monotonic() - began >= 0.04
    timer = threading.Timer(0.1, hub.publish, [FilesState.load(FILL)])
    timer.start()
    began = time.monotonic()
    assert hub.wait(1, 10) == 2
    assert time.monotonic() - began < 5
    timer.join()
    assert hub.wait(0, 10) == 2  # already past: at once


def test_hub_explain_is_the_cli_explain(tmp_path):
    hub = Hub(FilesState.load(FILL))
    for key in ("default/infer-b", "default/train-3b"):
        cli = CliRunner().invoke(main, ["explain", key, *[a for f in FILL for a in ("-f", f)], "-o", "json"])
        assert cli.exit_code == 0, cli.output
        assert hub.explain(key) == json.loads(cli.output)
    assert hub.explain("default/infer-b") is hub.explain("default/infer-b")  # cached for this version
    with pytest.raises(KeyError):
        hub.explain("default/no-such-pod")
    cached = hub.explain("default/infer-b")
    hub.publish(FilesState.load(FILL))
    assert hub.explain("default/infer-b") is not cached  # a new version explains again
    assert hub.explain("default/infer-b") == cached


def test_hub_pod_detail():
    hub = Hub(FilesState.load(FILL))
    detail = hub.pod("default/train-3b")
    assert detail is not None and detail["node"] == hub.run.result("default/train-3b").node
    assert hub.pod("default/nobody") is None


def test_hub_whatif_changes_nothing_it_shows():
    state = FilesState.load(FILL)
    hub = Hub(state)
    before, docs = dump(hub.view()), dump([d.doc for d in state.docs])
    out = hub.whatif({"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    assert out["lost"] or out["moved"]
    assert hub.version == 1 and dump(hub.view()) == before
    assert dump([d.doc for d in state.docs]) == docs
    with pytest.raises(InputError, match=r"actions\[0\]\.op"):
        hub.whatif({"actions": [{"op": "delete", "nodes": ["node-a"]}]})
    assert hub.version == 1 and dump(hub.view()) == before


def test_hub_is_thread_safe_under_publishes():
    states = [FilesState.load(LAB), FilesState.load(FILL)]
    hub = Hub(states[0])
    errors: list[BaseException] = []
    stop = threading.Event()

    def publisher() -> None:
        try:
            for i in range(12):
                hub.publish(states[i % 2])
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=publisher)
    thread.start()
    seen = []
    while not stop.is_set():
        full = hub.view()
        delta = hub.view(since=full["version"] - 1)
        assert delta["version"] >= full["version"]
        names = [n["name"] for n in full["nodes"]]
        assert names == ["node-a", "node-b", "node-c", "node-d"]
        seen.append(full["version"])
        hub.wait(full["version"], 0.01)
    thread.join()
    assert not errors
    assert hub.version == 13 and seen == sorted(seen)


def test_clone_is_deep():
    doc = {"a": [{"b": 1}], "c": ("x", {"d": 2})}
    copy = clone(doc)
    copy["a"][0]["b"] = 5
    assert doc["a"][0]["b"] == 1 and copy["c"] == doc["c"]


def test_a_newer_request_of_a_page_supersedes_its_older_ones():
    hub = Hub(FilesState.load(FILL))
    body = {"actions": [{"op": "cordon", "nodes": ["node-a"]}]}
    first, other = hub.ticket("page-1"), hub.ticket("page-2")
    newest = hub.ticket("page-1")
    assert first.cancelled.is_set() and not other.cancelled.is_set() and not newest.cancelled.is_set()
    with pytest.raises(Superseded):
        hub.whatif(body, first)  # stopped before any engine work
    # Both slots held (as two long runs would), one by a superseded request that stops at its next checkpoint: the
    # newest waits for its slot instead of a 429; held by live requests of other pages, it is Busy as before.
    slots = hub.engine_slots
    assert slots.acquire(timeout=1) and slots.acquire(timeout=1)
    stale = hub.ticket("page-3")
    hub.ticket("page-3")  # supersedes stale
    hub._holding.add(stale)
    timer = threading.Timer(0.4, lambda: (hub._holding.discard(stale), slots.release()))
    timer.start()
    try:
        assert hub.whatif(body, newest)["lost"]  # answered, after the superseded run gave its slot back
    finally:
        timer.join()
        slots.release()
    assert slots.acquire(timeout=1) and slots.acquire(timeout=1)
    try:
        with pytest.raises(Busy):
            hub.whatif(body, hub.ticket("page-4"))
    finally:
        slots.release()
        slots.release()


def test_a_pending_pods_explanation_is_of_the_final_state_with_the_clis_filters():
    """The UI explains a Pending pod on the run's final state (the map's): every node's first failing filter is the
    CLI's (which explains the pod's last attempt during the run), on the demo's whole Pending list."""
    hub = Hub(DemoState.lab(None))
    state = hub.state
    for entry in hub.view()["pending"]:
        key = entry["key"] if entry["kind"] == "pod" else entry["members"][0]["key"]
        fast = hub.explain(key)
        replay = hub._explain_replay(state, key, None)
        assert [(v["node"], v["feasible"], v.get("filter")) for v in fast["nodes"]] == [
            (v["node"], v["feasible"], v.get("filter")) for v in replay["nodes"]
        ], key
        assert fast["message"] == replay["message"], key


@pytest.mark.parametrize("make", [lambda: DemoState.lab(None), lambda: FilesState.load(LAB_FILES_ALL)])
def test_runs_explains_and_whatifs_leave_the_documents_unchanged(make):
    """Pods and nodes reach a run uncloned (the loader copies where the engine writes): over the lab's every feature
    (topology, MIG, time-slicing, DRA claims, gangs, preemption, DaemonSets) a publish, an explain of every Pending
    pod (replayed and on the final state) and a drain, taint and add of every node leave the documents as they were."""
    state = make()
    before = json.dumps([d.doc for d in state.docs], sort_keys=True)
    hub = Hub(state)
    for entry in hub.view()["pending"]:
        key = entry["key"] if entry["kind"] == "pod" else entry["members"][0]["key"]
        hub.explain(key)
        hub._explain_replay(state, key, None)
    for node in [n["metadata"]["name"] for n in state.nodes()]:
        hub.whatif({"actions": [{"op": "drain", "nodes": [node]}, {"op": "taint", "nodes": [node],
                                "taint": "x=y:NoExecute"}, {"op": "add", "node": node, "count": 1}]})  # fmt: skip
    hub.publish(state)
    assert json.dumps([d.doc for d in state.docs], sort_keys=True) == before


def test_the_history_keeps_a_point_per_version_and_exports_the_latest_as_prometheus_gauges():
    from prometheus_client.parser import text_string_to_metric_families

    from accelsched.ui import history

    hub = Hub(DemoState.lab(None))
    view = hub.view()
    hub.publish(FilesState.load(FILL))
    points = hub.history.points()
    assert [p["version"] for p in points] == [1, 2]
    first = points[0]
    cells = [c for n in view["nodes"] for g in n["groups"] for sw in g["switches"] for c in sw["devices"]]
    assert first["devices"] == sum(1 for c in cells if c["kind"] != "dra")  # physical devices, each once
    assert first["pending"] == view["counts"]["pending"] == sum(first["pendingByReason"].values())
    assert first["free"] == view["capacity"]["devices"]["free"]
    assert first["fragmented"] == {"mig": 2, "timeslicing": 0}
    # the reason the message blames on the most nodes, as the page groups by
    message = "0/16 nodes are available: 1 Insufficient nvidia.com/gpu, 14 node(s) didn't match Pod's node affinity."
    assert history.reason_of({"message": message}) == "node(s) didn't match Pod's node affinity"
    gauges = {
        (f.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(hub.history.metrics().decode())
        for s in f.samples
    }
    last = points[-1]
    assert gauges[("accelsched_ui_devices", (("state", "free"),))] == last["free"]
    assert gauges[("accelsched_ui_state_version", ())] == 2
    pending = {dict(k[1])["reason"]: v for k, v in gauges.items() if k[0] == "accelsched_ui_pending_pods"}
    assert pending == last["pendingByReason"]
    small = history.History(points=3)
    for v in range(5):
        small.record({**view, "version": v}, float(v))
    assert [p["version"] for p in small.points()] == [2, 3, 4], "bounded: the oldest go"


def test_the_pages_whatif_gets_only_the_nodes_that_differ_from_todays():
    hub = Hub(FilesState.load(FILL))
    body = {"actions": [{"op": "cordon", "nodes": ["node-a"]}, {"op": "add", "node": "node-b", "count": 1}]}
    full, delta = hub.whatif(body), hub.whatif(body, delta=True)
    today = {n["name"]: n["etag"] for n in hub.view()["nodes"]}
    assert delta["nodesDelta"] is True and delta["baseVersion"] == hub.version
    assert [n["name"] for n in delta["nodes"]] == [
        n["name"] for n in full["nodes"] if today.get(n["name"]) != n["etag"]
    ]
    assert {"node-a", "node-b-whatif-1"} <= {n["name"] for n in delta["nodes"]}
    assert len(delta["nodes"]) < len(full["nodes"])
    assert {k: v for k, v in delta.items() if k not in ("nodes", "nodesDelta", "baseVersion")} == {
        k: v for k, v in full.items() if k != "nodes"
    }


def test_a_whatif_run_from_todays_parsed_pods_equals_one_parsed_afresh() -> None:
    """state.PodCache: the first run parses every Pod document once; a what-if's run starts from fresh copies of
    those for the documents it did not touch, and its result is the one a run parsing everything gives, twice over
    (so no run wrote into the cached pods)."""
    from accelsched.ui import whatif

    state = DemoState.lab(None)
    today = execute(state)
    pods = [d.doc for d in state.docs if d.kind == "Pod"]
    assert len(state.pod_cache.pods) == len(pods) and not state.pod_cache.filling
    actions = whatif.parse({"actions": [{"op": "drain", "nodes": ["node-a"]}, {"op": "cordon", "nodes": ["node-b"]}]})
    uncached = DemoState.lab(None)
    uncached.pod_cache.filling = False  # parses every pod, every run
    expected = execute(whatif.apply(uncached, actions).state)
    assert not uncached.pod_cache.pods

    def as_json(run: Run) -> dict:
        return report.to_json(run.results, run.session.cluster)

    for _ in range(2):
        applied = whatif.apply(state, actions).state
        assert applied.pod_cache is state.pod_cache
        assert as_json(execute(applied)) == as_json(expected)
    assert as_json(execute(state)) == as_json(today)
