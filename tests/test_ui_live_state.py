"""LiveState runs the engine over the informers' own objects, uncopied (a copy of 5,000 nodes' objects was most of
a live publish): nothing a run, an explain or a what-if does may change them, or the caches would drift from the
API server. The lab's final state, as the API server would hold it, stands in for a cluster's caches."""

from __future__ import annotations

import json

from accelsched import report
from accelsched.live.convert import Snapshot
from accelsched.ui.hub import Hub
from accelsched.ui.live import LiveState
from accelsched.ui.state import DemoState, clone, execute


def lab_snapshot() -> Snapshot:
    """The demo's nodes, and its pods as kube-scheduler's binds leave them (bound ones with nodeName and the devices
    annotation, Pending ones as they were), with its PodGroups: what list+watch would cache."""
    demo = DemoState.lab(None)
    run = execute(demo)
    pods = [clone(p) for p in demo.pods() if (p.get("spec") or {}).get("nodeName")]  # bound by earlier steps
    tried = [clone(p) for p in report.to_objects(run.results)["items"] if p.get("kind", "Pod") == "Pod"]
    for pod, r in zip(tried, run.results, strict=True):
        if r.node is not None:
            pod.setdefault("spec", {})["nodeName"] = r.node
    pods += tried
    return Snapshot(nodes=[clone(n) for n in demo.nodes()], pods=pods, pod_groups=[clone(g) for g in demo.pod_groups()])


def test_runs_explains_and_whatifs_leave_the_cached_objects_as_they_were():
    snapshot = lab_snapshot()
    objects = [*snapshot.nodes, *snapshot.pods, *snapshot.pod_groups]
    before = [json.dumps(o, sort_keys=True) for o in objects]
    ids = [id(o) for o in objects]

    hub = Hub(LiveState(snapshot))
    view = hub.view()
    assert view["pending"], "the lab leaves pods Pending: explain must run on some"
    explained = []
    for entry in view["pending"]:
        key = entry["members"][0]["key"] if entry["kind"] == "gang" else entry["key"]
        explained.append(len(hub.explain(key)["nodes"]))  # none for a pod a gate kept from its attempt
        assert hub.pod(key) is not None
    assert max(explained) == len(snapshot.nodes)
    for node in ("node-e", "node-j"):
        out = hub.whatif({"actions": [{"op": "drain", "nodes": [node]}, {"op": "add", "node": node, "count": 1}]})
        assert out["evicted"]
    hub.publish(LiveState(snapshot))  # the next version over the same caches
    assert hub.version == 2

    assert [id(o) for o in objects] == ids
    assert [json.dumps(o, sort_keys=True) for o in objects] == before
