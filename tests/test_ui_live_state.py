"""LiveState runs the engine over the informers' own objects, uncopied (a copy of 5,000 nodes' objects was most of
a live publish): nothing a run, an explain or a what-if does may change them, or the caches would drift from the
API server. The lab's final state, as the API server would hold it, stands in for a cluster's caches."""

from __future__ import annotations

import json
import socket
import time

from kubernetes import client as k8s

from accelsched import report
from accelsched.live.convert import Snapshot
from accelsched.ui.hub import Hub
from accelsched.ui.live import LiveSource, LiveState, ReadOnlyKube, connection_status
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


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connection there is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_status_says_when_the_watches_fail_and_when_they_are_back():
    assert connection_status([True, True], None, "") is None  # never failed: nothing to say
    down = connection_status([True, False], None, "0 refused", now=0.0)
    assert down == {"connected": False, "since": "1970-01-01T00:00:00Z", "error": "0 refused"}
    assert connection_status([False, False], down, "later", now=5.0) is down  # no change: nothing to publish
    up = connection_status([True, True], down, "")
    assert up == {"connected": True}
    assert connection_status([True, True], up, "") is up


def test_a_live_source_that_cannot_reach_the_api_server_publishes_a_disconnected_status():
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{closed_port()}"
    configuration.retries = False
    source = LiveSource(ReadOnlyKube(k8s.ApiClient(configuration), timeout=2.0))
    for informer in source.informers.values():
        informer.start()
    try:
        deadline = time.monotonic() + 3.0
        while not source.kube.last_error and time.monotonic() < deadline:
            time.sleep(0.01)
        assert source.check_status()
        status = source.status
        assert status["connected"] is False and status["since"].endswith("Z")
        assert "Connection" in status["error"] or "refused" in status["error"], status
        assert not source.check_status()  # still down: unchanged, no new publish
    finally:
        for informer in source.informers.values():
            informer.stop()
            informer.join(5)
    for informer in source.informers.values():  # as a relist after the server is back sets them
        informer.watching.set()
    assert source.check_status() and source.status == {"connected": True}

    hub = Hub(LiveState(lab_snapshot(), status=status))
    assert hub.view()["status"] == status
    hub.publish(LiveState(lab_snapshot(), status=source.status))
    assert hub.view()["status"] == {"connected": True}
    assert "status" not in Hub(LiveState(lab_snapshot())).view()


def test_a_live_whatif_from_todays_parsed_pods_equals_one_parsed_afresh() -> None:
    """Live mode's PodCache: a what-if's run starts from copies of the pods today's run parsed (the informers'
    dicts it did not touch are the same objects) and gives the result of a run that parses everything, twice."""
    from accelsched.ui import whatif

    state = LiveState(lab_snapshot())
    today = execute(state)
    assert len(state.pod_cache.pods) == len(state.snapshot.pods) and not state.pod_cache.filling
    actions = whatif.parse({"actions": [{"op": "drain", "nodes": ["node-a"]}, {"op": "cordon", "nodes": ["node-b"]}]})
    uncached = LiveState(lab_snapshot())
    uncached.pod_cache.filling = False
    expected = execute(whatif.apply(uncached, actions).state)

    def as_json(run: object) -> dict:
        return report.to_json(run.results, run.session.cluster)  # type: ignore[attr-defined]

    for _ in range(2):
        applied = whatif.apply(state, actions).state
        assert applied.pod_cache is state.pod_cache
        assert as_json(execute(applied)) == as_json(expected)
    assert as_json(execute(state)) == as_json(today)
