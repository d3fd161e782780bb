"""What-if over the real engine on the lab: cordon, drain, taint and add nodes on a copy, and what they would change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsched.errors import InputError
from accelsched.ui import whatif
from accelsched.ui.hub import Hub
from accelsched.ui.state import DemoState, FilesState, execute

ROOT = Path(__file__).resolve().parent.parent
LAB = [str(ROOT / p) for p in ("examples/lab/00-nodes.yaml", "deploy/device-plugin-daemonset.yaml")]
FILL = [*LAB, str(ROOT / "examples/lab/06-fill.yaml")]
DS_POD = "kube-system/accelsched-device-plugin-"

BOUND_ON_A = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: web-1
      namespace: default
      ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "1", qualcomm.com/ai-accelerator: "1"},
                                         limits: {qualcomm.com/ai-accelerator: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: scratch, namespace: default}
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "1", qualcomm.com/ai-accelerator: "1"},
                                         limits: {qualcomm.com/ai-accelerator: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata:
      name: node-agent-a
      namespace: kube-system
      ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: node-agent, uid: u2, controller: true}]
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "100m"}}}]
"""

FOUR_MORE = """
apiVersion: v1
kind: Pod
metadata: {name: train-4b, namespace: default}
spec:
  containers: [{name: c, resources: {requests: {cpu: "8", qualcomm.com/ai-accelerator: "4"},
                                     limits: {qualcomm.com/ai-accelerator: "4"}}}]
"""


def dump(value) -> str:
    return json.dumps(value, sort_keys=True)


def run_whatif(state, body):
    before = execute(state)
    applied = whatif.apply(state.copy(), whatif.parse(body))
    after = execute(applied.state)
    return whatif.compare(before, after, applied.actions, applied.notes, applied.evicted)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_cordon_node_a_reports_who_loses_their_place_and_who_moves():
    state = FilesState.load(FILL)
    before = execute(state)
    on_a = sorted(r.pod.key for r in before.results if r.node == "node-a")
    assert "default/train-3b" in on_a  # the lab's fill puts a 3-card job there
    out = run_whatif(state, {"actions": [{"op": "cordon", "nodes": ["node-a"]}]})
    assert out["actions"] == [{"op": "cordon", "nodes": ["node-a"]}]
    assert [(e["pod"], e["from"]) for e in out["lost"]] == [("default/train-3b", "node-a")]
    after = whatif.apply(state.copy(), whatif.parse({"actions": [{"op": "cordon", "nodes": ["node-a"]}]}))
    message = execute(after.state).result("default/train-3b").message
    assert out["lost"][0]["message"] == message and "1 node(s) were unschedulable" in message
    # The two other jobs trade places: Pending in the input, placed by the run, so no move the cordon made; they
    # are listed apart. The device-plugin pod on node-a stays (it tolerates unschedulable).
    assert out["moved"] == []
    assert {(m["pod"], m["from"], m["to"]) for m in out["replaced"]} == {
        ("default/train-4", "node-b", "node-d"),
        ("default/train-3a", "node-d", "node-b"),
    }
    assert out["lost"][0]["placedByRun"] is True
    assert out["changedNodes"] == ["node-a"]
    assert not any(e["pod"].startswith(DS_POD) for e in out["lost"] + out["moved"])
    assert out["placed"] == [] and out["evicted"] == []
    assert out["readOnly"] == "What-if only: nothing is written to the cluster."
    assert out["order"] == ["node-a", "node-b", "node-c", "node-d"]
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert a.get("unschedulable") is True
    assert any("cordoned" in s for s in out["after"]["sentences"])
    assert not any("cordoned" in s for s in out["before"]["sentences"])
    assert [p["key"] for p in out["pendingAfter"]] == ["default/train-3b"]
    assert out["pendingBefore"] == []


def test_drain_evicts_bound_pods_but_daemonset_pods(tmp_path):
    state = FilesState.load([*LAB, write(tmp_path, "bound.yaml", BOUND_ON_A)])
    out = run_whatif(state, {"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    assert out["evicted"] == [
        {"pod": "default/web-1", "from": "node-a", "recreated": True, "cause": "drain"},
        {"pod": "default/scratch", "from": "node-a", "recreated": False, "cause": "drain"},
    ]
    assert out["notes"] == [  # plain kubectl drain refuses the node: the what-if says which flags it acts with
        "drain node-a: 2 pods evicted, 1 recreated by its controller",
        "drain node-a: done as kubectl drain --force --ignore-daemonsets --delete-emptydir-data",
        "drain node-a: kubectl drain would need --force: default/scratch has no controller",
        "drain node-a: kubectl drain would need --ignore-daemonsets: "
        "kube-system/node-agent-a is managed by a DaemonSet",
    ]
    assert [(e["pod"], e["message"]) for e in out["lost"]] == [
        ("default/scratch", "deleted by drain: no controller recreates it")
    ]
    (moved,) = out["moved"]  # recreated Pending, placed elsewhere: the node is cordoned
    assert moved["pod"] == "default/web-1" and moved["from"] == "node-a" and moved["to"] != "node-a"
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert "kube-system/node-agent-a" in a["pods"] and "default/scratch" not in a["pods"]
    assert a.get("unschedulable") is True


TOLERATING_ON_A = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: stays, namespace: default}
    spec:
      nodeName: node-a
      tolerations: [{key: power, operator: Exists, effect: NoExecute}]
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: for-a-while, namespace: default}
    spec:
      nodeName: node-a
      tolerations: [{key: power, operator: Exists, effect: NoExecute, tolerationSeconds: 300}]
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"""


def test_taint_no_execute_evicts_the_pods_that_do_not_tolerate_it(tmp_path):
    """The taint manager: a NoExecute taint evicts every pod there without a toleration for good (a DaemonSet's
    pod too, unless it tolerates it: the device plugin's tolerates every taint); NoSchedule evicts nothing."""
    state = FilesState.load([*LAB, write(tmp_path, "bound.yaml", BOUND_ON_A + TOLERATING_ON_A.split("items:", 1)[1])])
    out = run_whatif(state, {"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "power=off:NoExecute"}]})
    assert [(e["pod"], e["recreated"]) for e in out["evicted"]] == [
        ("default/web-1", True),
        ("default/scratch", False),
        ("kube-system/node-agent-a", False),  # its DaemonSet makes no pod where the taint is not tolerated
        ("default/for-a-while", False),
    ]
    assert {e["cause"] for e in out["evicted"]} == {"taint power=off:NoExecute"}
    lost = {e["pod"]: e["message"] for e in out["lost"]}  # the cause, not "deleted by drain"
    assert lost["default/scratch"] == "deleted by taint power=off:NoExecute: no controller recreates it"
    assert lost["kube-system/node-agent-a"].startswith("deleted by taint power=off:NoExecute: its DaemonSet makes")
    assert out["notes"] == [
        "taint node-a power=off:NoExecute",
        "taint node-a power=off:NoExecute: 4 pods evicted, 1 recreated by its controller",
    ]
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert "default/stays" in a["pods"] and "default/web-1" not in a["pods"]
    assert any(p.startswith(DS_POD) for p in a["pods"])  # tolerates every taint
    out = run_whatif(state, {"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "power=off:NoSchedule"}]})
    assert out["evicted"] == []


def test_taint_no_schedule_and_label_selected_nodes():
    state = FilesState.load(FILL)
    body = {"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "maintenance=true:NoSchedule"}]}
    out = run_whatif(state, body)
    assert [e["pod"] for e in out["lost"]] == ["default/train-3b"]
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert a["taints"] == ["maintenance=true:NoSchedule"]
    assert out["notes"] == ["taint node-a maintenance=true:NoSchedule"]

    pdu = {"label": "accelsched.io/pdu", "value": "pdu-1"}
    out = run_whatif(state, {"actions": [{"op": "cordon", "nodes": pdu}, {"op": "uncordon", "nodes": ["node-b"]}]})
    assert out["actions"] == [{"op": "cordon", "nodes": ["node-a", "node-b"]}, {"op": "uncordon", "nodes": ["node-b"]}]
    flags = {n["name"]: n.get("unschedulable", False) for n in out["nodes"]}  # view.py leaves out false keys
    assert flags == {"node-a": True, "node-b": False, "node-c": False, "node-d": False}


def test_add_copies_places_pending_pods_and_daemons(tmp_path):
    state = FilesState.load([*FILL, write(tmp_path, "more.yaml", FOUR_MORE)])
    assert execute(state).result("default/train-4b").node is None
    out = run_whatif(state, {"actions": [{"op": "add", "node": "node-a", "count": 2}]})
    assert out["actions"] == [{"op": "add", "node": "node-a", "count": 2}]
    (placed,) = out["placed"]  # Pending before, placed with the copies' room (the others may spread onto them)
    assert placed["pod"] == "default/train-4b"
    holders = {p: n["name"] for n in out["nodes"] for p in n["pods"]}
    assert holders["default/train-4b"] == placed["to"]
    assert out["lost"] == []
    assert all(m["to"].startswith("node-a-whatif-") for m in out["moved"])
    assert [n["name"] for n in out["nodes"]][-2:] == ["node-a-whatif-1", "node-a-whatif-2"]  # cluster order
    assert out["order"][:4] == ["node-a", "node-b", "node-a-whatif-1", "node-a-whatif-2"]  # grouped by PDU
    copies = {n["name"]: n for n in out["nodes"] if "whatif" in n["name"]}
    assert any(not p.startswith(DS_POD) for n in copies.values() for p in n["pods"])
    assert copies["node-a-whatif-1"]["labels"]["kubernetes.io/hostname"] == "node-a-whatif-1"
    for node in copies.values():  # the DaemonSet expands onto the copies, as the loader expands it
        assert any(p.startswith(DS_POD) for p in node["pods"])
    assert [p["key"] for p in out["pendingBefore"]] == ["default/train-4b"] and out["pendingAfter"] == []


def test_demo_copies_get_their_daemon_pods():
    """In the demo the DaemonSet was expanded at step 1: its pods are objects, copied onto each new node."""
    state = DemoState.lab(6)
    out = run_whatif(state, {"actions": [{"op": "add", "node": "node-b", "count": 1}]})
    (copy,) = [n for n in out["nodes"] if n["name"] == "node-b-whatif-1"]
    assert any(p.startswith(DS_POD) for p in copy["pods"])
    assert out["notes"] == [  # the demo cordons node-b; a copy is a new node, schedulable
        "add 1 copy of node-b: node-b-whatif-1",
        "add 1 copy of node-b: the copies join Ready and schedulable, without node-b's spec.unschedulable",
    ]
    assert copy.get("unschedulable") is None


def test_whatif_leaves_the_state_and_the_hub_alone(tmp_path):
    state = FilesState.load([*LAB, write(tmp_path, "bound.yaml", BOUND_ON_A)])
    hub = Hub(state)
    view, docs = dump(hub.view()), dump([d.doc for d in state.docs])
    body = {
        "actions": [
            {"op": "drain", "nodes": ["node-a"]},
            {"op": "taint", "nodes": ["node-b"], "taint": "x=y:NoExecute"},
            {"op": "add", "node": "node-d", "count": 3},
            {"op": "cordon", "nodes": ["node-c"]},
            {"op": "uncordon", "nodes": ["node-c"]},
            {"op": "taint", "nodes": ["node-d"], "taint": "gpu=yes:NoSchedule"},
        ]
    }
    out = hub.whatif(body)  # copy on write: the state's own dicts are never edited
    assert out["evicted"] and len(out["order"]) == 7
    assert hub.version == 1 and dump(hub.view()) == view and dump([d.doc for d in state.docs]) == docs
    with pytest.raises(InputError):  # an error halfway (the second action) leaves nothing behind either
        hub.whatif({"actions": [{"op": "cordon", "nodes": ["node-a"]}, {"op": "drain", "nodes": ["node-z"]}]})
    assert hub.version == 1 and dump(hub.view()) == view and dump([d.doc for d in state.docs]) == docs


@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        ([], "body", "JSON object"),
        ({"actions": []}, "actions", "non-empty"),
        ({"actions": [{"op": "cordon"}] * 101}, "actions", "at most 100"),
        ({"actions": [{"op": "reboot", "nodes": ["node-a"]}]}, "actions[0].op", "must be one of"),
        ({"actions": ["cordon"]}, "actions[0]", "object"),
        ({"actions": [{"op": "cordon", "nodes": []}]}, "actions[0].nodes", "non-empty"),
        ({"actions": [{"op": "cordon", "nodes": [3]}]}, "actions[0].nodes[0]", "string"),
        ({"actions": [{"op": "cordon", "nodes": ["node-a"], "force": True}]}, "actions[0].force", "unknown"),
        ({"actions": [{"op": "cordon", "nodes": {"label": "a b", "value": "x"}}]}, "actions[0].nodes.label", "name"),
        ({"actions": [{"op": "cordon", "nodes": {"label": "a", "value": "-x"}}]}, "actions[0].nodes.value", "label"),
        ({"actions": [{"op": "taint", "nodes": ["node-a"]}]}, "actions[0].taint", "non-empty"),
        ({"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "k=v"}]}, "actions[0].taint", "key[=value]"),
        ({"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "k=v:Never"}]}, "actions[0].taint", "Unsupported"),
        ({"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "-k:NoSchedule"}]}, "actions[0].taint", "-k"),
        ({"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "k=a b:NoSchedule"}]}, "actions[0].taint", "a b"),
        ({"actions": [{"op": "add", "node": "node-a", "count": 0}]}, "actions[0].count", "1 to 1000"),
        ({"actions": [{"op": "add", "node": "node-a", "count": 1001}]}, "actions[0].count", "1 to 1000"),
        ({"actions": [{"op": "add", "node": "node-a", "count": True}]}, "actions[0].count", "integer"),
        ({"actions": [{"op": "add", "count": 2}]}, "actions[0].node", "non-empty"),
    ],
)
def test_bad_bodies_name_the_field(body, field, text):
    with pytest.raises(InputError) as exc:
        whatif.parse(body)
    assert exc.value.field == field
    assert text in str(exc.value)


@pytest.mark.parametrize(
    ("actions", "field", "text"),
    [
        ([{"op": "cordon", "nodes": ["node-a", "node-z"]}], "actions[0].nodes[1]", "no node 'node-z'"),
        ([{"op": "drain", "nodes": {"label": "accelsched.io/pdu", "value": "pdu-9"}}], "actions[0].nodes", "pdu-9"),
        ([{"op": "add", "node": "node-z", "count": 1}], "actions[0].node", "no node"),
        ([{"op": "add", "node": "node-a", "count": 1000}] * 10, "actions[9].count", "at most 10000 nodes"),
    ],
)
def test_unknown_nodes_and_too_many_nodes(actions, field, text):
    state = FilesState.load(LAB)
    with pytest.raises(InputError) as exc:
        whatif.apply(state.copy(), whatif.parse({"actions": actions}))
    assert exc.value.field == field and text in str(exc.value)


def test_taint_parse_and_overwrite():
    assert whatif.parse_taint("a.example.com/k=v:NoExecute", "t") == {
        "key": "a.example.com/k",
        "value": "v",
        "effect": "NoExecute",
    }
    assert whatif.parse_taint("k:PreferNoSchedule", "t") == {"key": "k", "effect": "PreferNoSchedule"}
    state = FilesState.load(LAB)
    body = {
        "actions": [
            {"op": "taint", "nodes": ["node-c"], "taint": "maintenance=false:NoSchedule"},  # overwrites node-c's
        ]
    }
    applied = whatif.apply(state.copy(), whatif.parse(body))
    (c,) = [n for n in applied.state.nodes() if n["metadata"]["name"] == "node-c"]
    assert c["spec"]["taints"] == [{"key": "maintenance", "value": "false", "effect": "NoSchedule"}]


PINNED = """
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: node-a}
  containers: [{name: c, resources: {requests: {cpu: "1", qualcomm.com/ai-accelerator: "1"},
                                     limits: {qualcomm.com/ai-accelerator: "1"}}}]
"""


def lab_nodes(tmp_path: Path, node_a_spec: str) -> str:
    """The lab's nodes with node-a's spec replaced (the first ``spec: {}`` of the file is node-a's)."""
    text = (ROOT / "examples/lab/00-nodes.yaml").read_text()
    assert text.index("spec: {}") < text.index("name: node-b")
    return write(tmp_path, "nodes.yaml", text.replace("spec: {}", f"spec: {node_a_spec}", 1))


def node_doc(state, name: str) -> dict:
    (doc,) = [n for n in state.nodes() if n["metadata"]["name"] == name]
    return doc


UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def test_cordon_adds_the_unschedulable_taint_and_uncordon_frees_a_node_cordoned_in_a_cluster(tmp_path):
    """A node cordoned in a cluster carries spec.unschedulable and the node lifecycle controller's
    node.kubernetes.io/unschedulable:NoSchedule taint: uncordon takes off both, so the pod pinned there lands. A
    what-if cordon makes the same node, and the pinned pod's message is the same: NodeUnschedulable runs before
    TaintToleration, so the node counts as unschedulable only, never as an untolerated taint."""
    cordoned = lab_nodes(tmp_path, '{unschedulable: true, taints: [{key: node.kubernetes.io/unschedulable, '
                                   'effect: NoSchedule}]}')  # fmt: skip
    pinned = write(tmp_path, "pinned.yaml", PINNED)
    state = FilesState.load([cordoned, LAB[1], pinned])
    message = execute(state).result("default/pinned").message
    # node-a counts once, for NodeUnschedulable; the untolerated taint is node-c's maintenance one
    assert message.startswith(
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    out = run_whatif(state, {"actions": [{"op": "uncordon", "nodes": ["node-a"]}]})
    assert out["placed"] == [{"pod": "default/pinned", "to": "node-a"}]
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert a.get("unschedulable") is None and not a.get("taints")  # view.py leaves out empty keys

    plain = FilesState.load([*LAB, pinned])
    body = {"actions": [{"op": "cordon", "nodes": ["node-a"]}, {"op": "drain", "nodes": ["node-a"]}]}
    applied = whatif.apply(plain.copy(), whatif.parse(body))
    spec = node_doc(applied.state, "node-a")["spec"]
    assert spec["unschedulable"] is True and spec["taints"] == [UNSCHEDULABLE]  # added once, as the controller does
    assert execute(applied.state).result("default/pinned").message == message
    applied = whatif.apply(state.copy(), whatif.parse({"actions": [{"op": "cordon", "nodes": ["node-a"]}]}))
    assert node_doc(applied.state, "node-a")["spec"]["taints"] == [UNSCHEDULABLE]  # already there: not twice


MIXED_ON_A = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: etcd-node-a
      namespace: kube-system
      annotations: {kubernetes.io/config.mirror: 3f1c, kubernetes.io/config.source: file}
      ownerReferences: [{apiVersion: v1, kind: Node, name: node-a, uid: n1, controller: true}]
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "100m"}}}]
  - apiVersion: v1
    kind: Pod
    metadata:
      name: node-owned
      namespace: default
      ownerReferences: [{apiVersion: v1, kind: Node, name: node-a, uid: n1, controller: true}]
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "100m"}}}]
  - apiVersion: v1
    kind: Pod
    metadata:
      name: cache
      namespace: default
      ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: cache, uid: u3, controller: true}]
    spec:
      nodeName: node-a
      volumes: [{name: scratch, emptyDir: {}}]
      containers: [{name: c, resources: {requests: {cpu: "1", qualcomm.com/ai-accelerator: "1"},
                                         limits: {qualcomm.com/ai-accelerator: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: bare-scratch, namespace: default}
    spec:
      nodeName: node-a
      volumes: [{name: scratch, emptyDir: {medium: Memory}}]
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: done, namespace: default}
    spec:
      nodeName: node-a
      containers: [{name: c, resources: {requests: {cpu: "1"}}}]
    status: {phase: Succeeded}
"""


def test_drain_keeps_mirror_pods_and_names_what_plain_kubectl_drain_refuses(tmp_path):
    """kubectl drain skips mirror pods, and a NoExecute taint's eviction of one is undone by its kubelet: the
    static pod stays bound in both. A Node owner recreates nothing elsewhere. Plain kubectl drain refuses bare
    pods (--force) and emptyDir pods (--delete-emptydir-data); a finished pod or a mirror pod blocks nothing."""
    state = FilesState.load([*LAB, write(tmp_path, "mixed.yaml", MIXED_ON_A)])
    out = run_whatif(state, {"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    assert [(e["pod"], e["recreated"]) for e in out["evicted"]] == [
        ("default/node-owned", False),
        ("default/cache", True),
        ("default/bare-scratch", False),
    ]
    assert out["notes"] == [
        "drain node-a: 3 pods evicted, 1 recreated by its controller",
        "drain node-a: done as kubectl drain --force --ignore-daemonsets --delete-emptydir-data",
        "drain node-a: kubectl drain would need --force: default/bare-scratch has no controller",
        "drain node-a: kubectl drain would need --delete-emptydir-data: "
        "default/cache, default/bare-scratch use emptyDir",
    ]
    assert {e["pod"]: e["message"] for e in out["lost"]} == {
        "default/node-owned": "deleted by drain: no controller recreates it",
        "default/bare-scratch": "deleted by drain: no controller recreates it",
    }
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert "kube-system/etcd-node-a" in a["pods"]
    out = run_whatif(state, {"actions": [{"op": "taint", "nodes": ["node-a"], "taint": "power=off:NoExecute"}]})
    assert "kube-system/etcd-node-a" not in {e["pod"] for e in out["evicted"]}
    (a,) = [n for n in out["nodes"] if n["name"] == "node-a"]
    assert "kube-system/etcd-node-a" in a["pods"]


def test_copies_of_a_cordoned_not_ready_node_join_ready_and_schedulable(tmp_path):
    """A copy is a new node: no cordon and no node.kubernetes.io/ taints of the original's state; its own taints
    (a GPU pool's) are copied. The original keeps all of them."""
    nodes = lab_nodes(
        tmp_path,
        "{unschedulable: true, taints: [{key: node.kubernetes.io/unschedulable, effect: NoSchedule},"
        " {key: node.kubernetes.io/not-ready, effect: NoExecute}, {key: pool, value: gpu, effect: NoSchedule}]}",
    )
    state = FilesState.load([nodes, LAB[1]])
    out = run_whatif(state, {"actions": [{"op": "add", "node": "node-a", "count": 2}]})
    assert out["notes"] == [
        "add 2 copies of node-a: node-a-whatif-1, node-a-whatif-2",
        "add 2 copies of node-a: the copies join Ready and schedulable, without node-a's spec.unschedulable, "
        "taint node.kubernetes.io/unschedulable:NoSchedule, taint node.kubernetes.io/not-ready:NoExecute",
    ]
    views = {n["name"]: n for n in out["nodes"]}
    for name in ("node-a-whatif-1", "node-a-whatif-2"):
        assert views[name].get("unschedulable") is None and views[name]["taints"] == ["pool=gpu:NoSchedule"]
    assert views["node-a"]["unschedulable"] is True and len(views["node-a"]["taints"]) == 3
    out = run_whatif(state, {"actions": [{"op": "add", "node": "node-b", "count": 1}]})
    assert out["notes"] == ["add 1 copy of node-b: node-b-whatif-1"]  # nothing dropped: nothing said


def gang_members(placement: dict[str, tuple[str, bool]]) -> str:
    """A PodGroup g (minMember 4) and its members: name -> (node bound to, owned by a Job controller)."""
    items = [
        "  - {apiVersion: scheduling.x-k8s.io/v1alpha1, kind: PodGroup, metadata: {name: g, namespace: default},"
        " spec: {minMember: 4}}"
    ]
    for name, (node, owned) in placement.items():
        owner = ", ownerReferences: [{apiVersion: batch/v1, kind: Job, name: g, uid: j1, controller: true}]"
        items.append(
            f"  - apiVersion: v1\n    kind: Pod\n    metadata: {{name: {name}, namespace: default,"
            f" labels: {{scheduling.x-k8s.io/pod-group: g}}{owner if owned else ''}}}\n"
            f"    spec:\n      nodeName: {node}\n      containers: [{{name: c, resources: {{requests: {{cpu: '1',"
            " qualcomm.com/ai-accelerator: '1'}, limits: {qualcomm.com/ai-accelerator: '1'}}}]"
        )
    return "apiVersion: v1\nkind: List\nitems:\n" + "\n".join(items) + "\n"


def test_drain_deletes_bare_gang_members_and_the_gang_stays_short():
    """kubectl drain --force deletes the demo's bare train-a workers on node-j: nothing refuses that in a cluster
    (the PodGroup stays, the other two keep running on node-k), so the what-if runs and says what it did."""
    state = DemoState.lab(None)
    hub = Hub(state)
    on_j = sorted(p for p, node in hub.run.placements().items() if node == "node-j")
    assert on_j == ["default/train-a-1", "default/train-a-3"]
    out = hub.whatif({"actions": [{"op": "drain", "nodes": ["node-j"]}]})
    assert out["notes"] == [
        "drain node-j: 2 pods evicted, 0 recreated by their controllers",
        "drain node-j: done as kubectl drain --force --ignore-daemonsets --delete-emptydir-data",
        "drain node-j: kubectl drain would need --force: default/train-a-1, default/train-a-3 have no controller",
        "drain node-j: PodGroup default/train-a loses 2 of its 4 members; 2 stay bound; "
        "the gang cannot be whole again (minMember 4) until they are recreated",
    ]
    assert out["evicted"] == [{"pod": p, "from": "node-j", "recreated": False, "cause": "drain"} for p in on_j]
    assert [(e["pod"], e["from"]) for e in out["lost"]] == [(p, "node-j") for p in on_j]
    assert out["moved"] == [] and out["placed"] == []
    (k,) = [n for n in out["nodes"] if n["name"] == "node-k"]
    assert {"default/train-a-0", "default/train-a-2"} <= set(k["pods"])  # still bound where they were
    assert hub.version == 1 and not any(p["key"] == "default/train-a" for p in out["pendingAfter"])


def test_a_drained_state_runs_its_gangs_as_the_cluster_and_other_state_as_schedule(tmp_path):
    """Gangs a drain took members from run as the cluster runs them; a copy of input that was short from the
    start is read as ``schedule -f`` reads it (its bound members stay)."""
    bare = gang_members({f"w-{i}": ("node-a", False) for i in range(4)})
    state = FilesState.load([*LAB, write(tmp_path, "g.yaml", bare)])
    applied = whatif.apply(state.copy(), whatif.parse({"actions": [{"op": "drain", "nodes": ["node-a"]}]}))
    assert applied.state.changed_gangs == {"default/g"} and state.changed_gangs == frozenset()
    execute(applied.state)
    short = state.replace(state.nodes(), [p for p in state.pods() if p["metadata"]["name"] != "w-0"])
    run = execute(short)  # valid input (issue 28): a gang short of minMember waits for more pods
    assert {k: v for k, v in run.placements().items() if "/w-" in k} == {f"default/w-{i}": "node-a" for i in (1, 2, 3)}


@pytest.mark.parametrize(
    ("placement", "moved", "lost", "note"),
    [
        # All four recreated Pending: the gang is placed whole again, off the cordoned node.
        ({f"w-{i}": ("node-a", True) for i in range(4)}, 4, [], "0 stay bound, 4 recreated Pending: the recreated"),
        # Two recreated, two still bound on node-b: the bound ones count toward minMember, the two are placed.
        (
            {"w-0": ("node-a", True), "w-1": ("node-a", True), "w-2": ("node-b", True), "w-3": ("node-b", True)},
            2,
            [],
            "2 stay bound, 2 recreated Pending: the recreated members are scheduled together",
        ),
        # One deleted (bare), one recreated: 3 pods of minMember 4 exist, the recreated one waits for the rest.
        (
            {"w-0": ("node-a", False), "w-1": ("node-a", True), "w-2": ("node-b", True), "w-3": ("node-b", True)},
            0,
            ["default/w-0", "default/w-1"],
            "loses 1 of its 4 members; 2 stay bound, 1 recreated Pending; the gang cannot be whole again",
        ),
    ],
)
def test_drain_recreated_gang_members_are_scheduled_as_a_gang_again(tmp_path, placement, moved, lost, note):
    state = FilesState.load([*LAB, write(tmp_path, "g.yaml", gang_members(placement))])
    out = run_whatif(state, {"actions": [{"op": "drain", "nodes": ["node-a"]}]})
    assert len(out["moved"]) == moved and all(m["to"] != "node-a" for m in out["moved"])
    assert [e["pod"] for e in out["lost"]] == lost
    (gang_note,) = [n for n in out["notes"] if "PodGroup default/g" in n]
    assert note in gang_note
    if lost:  # the recreated member waits, named with why, as live mode holds such a gang back
        assert out["lost"][1]["message"] == (
            f"0/{len(state.nodes())} nodes are available: pre-filter pod w-1 cannot find enough sibling pods,"
            " current pods number: 3, minMember of group: 4."
        )
        (entry,) = [p for p in out["pendingAfter"] if p["key"] == "default/g"]
        assert entry["kind"] == "gang" and entry["status"] == "Gated"


LAB_STEPS = (
    "02-train-16",
    "03-maintenance",
    "06-fill",
    "07-topology",
    "08-fractional",
    "09-gangs",
    "10-preemption",
    "12-fabric-nodes",
    "12-fabric-gang",
    "13-fabric-preemption",
    "14-queues",
    "15-queues-reclaim",
)
LAB_FILES = [
    *LAB,
    *(str(ROOT / f"examples/lab/{name}.yaml") for name in LAB_STEPS),
    *sorted(str(p) for p in (ROOT / "examples/lab").glob("11-dra-*.yaml")),
]


@pytest.fixture(scope="module")
def hubs():
    return [Hub(DemoState.lab(None)), Hub(FilesState.load(LAB_FILES))]


@pytest.mark.parametrize("op", ["cordon", "drain", "taint", "add"])
def test_every_op_on_every_node_of_the_demo_and_the_lab_files(hubs, op):
    """One what-if per node, on the whole demo and on the lab's files together (34 nodes each): each runs and
    returns a body, whatever the node holds (gangs, DaemonSet pods, MIG, DRA slices, topology, fabric gangs, Kueue
    workloads)."""
    for hub in hubs:
        state = hub.state
        names = [n["metadata"]["name"] for n in state.nodes()]
        assert len(names) == 34
        for name in names:
            action = {"op": op, "node": name, "count": 1} if op == "add" else {"op": op, "nodes": [name]}
            if op == "taint":
                action["taint"] = "whatif=yes:NoSchedule"
            out = hub.whatif({"actions": [action]})
            assert out["readOnly"] == whatif.READ_ONLY and len(out["order"]) == 34 + (op == "add")
            held = {p for n in out["nodes"] for p in n.get("pods", ())}
            assert not {e["pod"] for e in out["evicted"] if not e["recreated"]} & held  # deleted: nowhere after
        assert hub.version == 1


def test_with_files_a_drain_moves_only_pods_bound_in_the_input(tmp_path):
    """-f input where most pods are Pending: a drain re-runs the queue, and pods the run placed may land elsewhere
    by its order alone. Only pods bound in the input (and evicted by the drain) count as moved; the others that
    land elsewhere are ``replaced``; pods placed identically in both runs are in no list."""
    from benchmarks.ui import generate

    cluster = generate(80)
    for pod in cluster.pods:  # give the bound ones a controller, so a drain recreates them Pending
        if pod["spec"].get("nodeName"):
            pod["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
            ]
        else:  # and make the Pending ones small enough to be placed all over
            pod["spec"].pop("nodeSelector", None)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*cluster.nodes, *cluster.pods]}))
    state = FilesState.load([str(path)])
    bound = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in cluster.pods if p["spec"].get("nodeName")}
    body = {"actions": [{"op": "drain", "nodes": {"label": "accelsched.io/rack", "value": "rack-000"}}]}
    out = Hub(state).whatif(body)
    drained = out["actions"][0]["nodes"]
    assert len(drained) == 32
    evicted = {e["pod"] for e in out["evicted"]}
    assert evicted and evicted <= bound and all(e["recreated"] for e in out["evicted"])
    assert out["moved"], "recreated pods find other nodes"
    assert all(m["pod"] in bound and m["pod"] in evicted for m in out["moved"])
    assert all(m["pod"] not in bound for m in out["replaced"])
    before, after = execute(state), execute(whatif.apply(state.copy(), whatif.parse(body)).state)
    was, now = before.placements(), after.placements()
    same = {k for k, n in was.items() if k not in bound and n is not None and now.get(k) == n}
    listed = {e["pod"] for key in ("lost", "moved", "placed", "replaced") for e in out[key]}
    assert not same & listed, "pods placed identically in both runs are in no list"
    assert out["replaced"], "the re-run queue places some Pending pods elsewhere: listed apart, not as moved"
    assert {e["pod"] for e in out["replaced"]} == {k for k, n in was.items() if k not in bound and n and now.get(k)
                                                   and now[k] != n}  # fmt: skip
    assert set(drained) <= set(out["changedNodes"])


def test_a_whatifs_node_views_are_todays_where_the_node_did_not_change():
    """The what-if reuses today's node view for every node whose signature did not change, and its views equal
    those built from scratch."""
    from accelsched.ui import view

    hub = Hub(FilesState.load(FILL))
    out = hub.whatif({"actions": [{"op": "cordon", "nodes": ["node-a"]}]})
    today = {n["name"]: n for n in hub.view()["nodes"]}
    after = execute(whatif.apply(hub.state, whatif.parse({"actions": [{"op": "cordon", "nodes": ["node-a"]}]})).state)
    fresh = {n["name"]: n for n in view.build_view(after, None)["nodes"]}
    assert {n["name"]: n for n in out["nodes"]} == fresh
    reused = [n["name"] for n in out["nodes"] if n is today.get(n["name"])]
    assert "node-a" not in reused and "node-c" in reused  # node-c: tainted, untouched by the cordon's re-run
