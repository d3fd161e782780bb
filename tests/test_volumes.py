"""The volume plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) over real storage objects.

Expected reasons and messages are written from kube-scheduler v1.36.3's source (volumebinding/binder.go,
volume_restrictions.go, volume_zone.go, nodevolumelimits/csi.go) until the HARNESS records them from the binary.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import HOSTNAME, ZONE, filter_message, node, pod, reason_counts, start

from accelsched.api.storage import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from accelsched.cluster.volumes import volume_state
from accelsched.errors import InputError
from accelsched.plugins import registry, volumebinding, volumerestrictions, volumezone
from accelsched.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED


def pv(
    name: str,
    size: str = "100Gi",
    *,
    sc: str = "local",
    on: str | None = None,
    labels: dict[str, str] | None = None,
    claim: tuple[str, str] | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    csi: tuple[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": sc}
    if on is not None:
        spec["local"] = {"path": "/mnt/nvme0"}
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if csi is not None or on is None:
        driver, handle = csi or ("pd.csi.storage.gke.io", name)
        spec["csi"] = {"driver": driver, "volumeHandle": handle}
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {
        "status": {"phase": "Bound" if claim else "Available"},"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec}  # fmt: skip


def pvc(
    name: str,
    size: str = "10Gi",
    *,
    sc: str | None = "local",
    volume: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if sc is not None:
        spec["storageClassName"] = sc
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": dict(annotations or {})}
    status: dict[str, Any] = {"phase": "Pending"}
    if volume:
        spec["volumeName"] = volume
        meta["annotations"][ANN_BIND_COMPLETED] = "yes"
        status = {"phase": "Bound"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec, "status": status}


def storage_class(name: str = "local", provisioner: str = "kubernetes.io/no-provisioner", *,
                  wffc: bool = True, zones: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    doc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner,
                           "volumeBindingMode": "WaitForFirstConsumer" if wffc else "Immediate"}  # fmt: skip
    if zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return doc


def with_claims(doc: dict[str, Any], *claims: str, **sources: dict[str, Any]) -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": kind.lower(), kind: src} for kind, src in sources.items()]
    doc["spec"]["volumes"] = volumes
    return doc


def results(*docs: dict[str, Any], **kw: Any) -> dict[str, Any]:
    session = start(*docs, **kw)
    return {r.pod.name: r for r in session.schedule()}


def test_volume_plugins_sit_after_noderesourcesfit_in_kube_scheduler_order() -> None:
    names = [name for name, _ in registry.DEFAULT_PLUGINS]
    fit = names.index("NodeResourcesFit")
    assert names[fit + 1 : fit + 5] == ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"]


def test_bound_local_pv_pins_the_pod_to_its_node() -> None:
    docs = [node(f"gpu-{i}") for i in range(3)]
    docs += [storage_class(), pv("scratch-1", on="gpu-1", claim=("default", "scratch")), pvc("scratch",
             volume="scratch-1"), with_claims(pod("trainer"), "scratch")]  # fmt: skip
    assert results(*docs)["trainer"].node == "gpu-1"


def test_bound_pv_elsewhere_is_a_node_affinity_conflict_that_preemption_cannot_fix() -> None:
    # gpu-0 holds a low-priority pod: were the PV conflict resolvable, preemption would try evicting it there.
    docs = [node("gpu-0"), node("gpu-1", cpu="1"), pod("filler", cpu="1", node_name="gpu-0", priority=0)]
    docs += [
        storage_class(),
        pv("scratch-1", on="gpu-1", claim=("default", "scratch")),
        pvc("scratch", volume="scratch-1"),
        with_claims(pod("trainer", cpu="2", priority=10), "scratch"),
    ]
    out = results(*docs)
    r = out["trainer"]
    assert r.node is None and not r.preempted
    assert reason_counts(r) == {"Insufficient cpu": 1, volumebinding.ERR_REASON_NODE_CONFLICT: 1}
    assert "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling." in r.message


def test_missing_claim_rejects_at_prefilter() -> None:
    r = results(node("a"), node("b"), with_claims(pod("p"), "nope"))["p"]
    assert filter_message(r) == '0/2 nodes are available: persistentvolumeclaim "nope" not found.'


def test_unbound_immediate_claim_rejects_at_prefilter() -> None:
    docs = [node("a"), storage_class(wffc=False), pvc("data"), with_claims(pod("p"), "data")]
    r = results(*docs)["p"]
    assert filter_message(r) == f"0/1 nodes are available: {volumebinding.ERR_UNBOUND_IMMEDIATE}."


def test_claim_with_volume_name_but_not_bind_completed_is_not_bound() -> None:
    claim = pvc("data", volume="pv-1")
    del claim["metadata"]["annotations"][ANN_BIND_COMPLETED]
    docs = [node("a"), storage_class(), pv("pv-1", claim=("default", "data")), claim, with_claims(pod("p"), "data")]
    assert filter_message(results(*docs)["p"]) == f"0/1 nodes are available: {volumebinding.ERR_UNBOUND_IMMEDIATE}."


def test_wait_for_first_consumer_takes_the_smallest_fitting_pv_and_the_next_pod_sees_it_taken() -> None:
    docs = [node("a"), node("b"), storage_class()]
    docs += [pv("a-big", "500Gi", on="a"), pv("a-small", "50Gi", on="a"), pv("a-tiny", "5Gi", on="a")]
    docs += [pvc("c1", "40Gi"), pvc("c2", "40Gi"), pvc("c3", "40Gi")]
    docs += [with_claims(pod(f"p{i}"), f"c{i}") for i in (1, 2, 3)]
    session = start(*docs)
    out = {r.pod.name: r for r in session.schedule()}
    volumes = volume_state(session.cluster)
    assert [out[p].node for p in ("p1", "p2")] == ["a", "a"]
    assert volumes.volume("a-small").claim_ref.name == "c1"  # smallest that fits, first pod first
    assert volumes.volume("a-big").claim_ref.name == "c2"
    assert volumes.claim("default", "c1").volume_name == "a-small"  # offline PreBind completes the binding
    assert out["p3"].node is None
    assert reason_counts(out["p3"]) == {volumebinding.ERR_REASON_BIND_CONFLICT: 2}


def test_claim_selector_and_access_modes_limit_the_match() -> None:
    docs = [node("a"), node("b"), storage_class()]
    docs += [pv("a-fast", on="a", labels={"tier": "fast"}), pv("b-slow", on="b", labels={"tier": "slow"}),
             pv("b-many", on="b", modes=("ReadWriteMany",), labels={"tier": "fast"})]  # fmt: skip
    claim = pvc("c1")
    claim["spec"]["selector"] = {"matchLabels": {"tier": "fast"}}
    docs += [claim, with_claims(pod("p"), "c1")]
    assert results(*docs)["p"].node == "a"


def test_dynamic_provisioning_honours_allowed_topologies_and_storage_capacity() -> None:
    docs = [node(n, labels={ZONE: z}) for n, z in (("na", "za"), ("nb", "zb"), ("nc", "zc"))]
    docs += [storage_class("fast", "csi.example.com", zones=("za", "zb"))]
    docs += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"},
              "spec": {"storageCapacity": True}}]  # fmt: skip
    for zone, size in (("za", "10Gi"), ("zb", "100Gi")):
        docs.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                     "metadata": {"name": f"cap-{zone}", "namespace": "kube-system"}, "storageClassName": "fast",
                     "nodeTopology": {"matchLabels": {ZONE: zone}}, "capacity": size})  # fmt: skip
    docs += [pvc("big", "50Gi", sc="fast"), with_claims(pod("p"), "big")]
    docs += [pvc("huge", "500Gi", sc="fast"), with_claims(pod("q"), "huge")]
    session = start(*docs)
    out = {r.pod.name: r for r in session.schedule()}
    assert out["p"].node == "nb"
    assert volume_state(session.cluster).claim("default", "big").annotations[ANN_SELECTED_NODE] == "nb"
    assert reason_counts(out["q"]) == {
        volumebinding.ERR_REASON_BIND_CONFLICT: 1,
        volumebinding.ERR_REASON_NOT_ENOUGH_SPACE: 2,
    }


def test_a_claim_with_a_selected_node_fits_that_node_only() -> None:
    docs = [node("a"), node("b"), storage_class("fast", "csi.example.com")]
    docs += [pvc("c", sc="fast", annotations={ANN_SELECTED_NODE: "b"}), with_claims(pod("p"), "c")]
    assert results(*docs)["p"].node == "b"


def test_rollback_restores_the_assume_cache() -> None:
    docs = [node("a"), storage_class(), pv("a-1", on="a"), pvc("c1"), with_claims(pod("p"), "c1")]
    session = start(*docs)
    scheduler = session.scheduler
    held: list = []
    result = scheduler.schedule_one(session.inputs.pending[0], hold=held)
    assert result.node == "a"
    volumes = volume_state(session.cluster)
    assert volumes.volume("a-1").claim_ref is not None  # Reserve assumed the binding
    scheduler.release(held[0])
    assert volumes.volume("a-1").claim_ref is None
    assert volumes.claim("default", "c1").volume_name == ""


def test_read_write_once_pod_claim_in_use_rejects_every_node_and_preemption_evicts_its_user() -> None:
    docs = [node("a"), node("b"), storage_class(), pv("a-1", on="a", claim=("default", "solo"),
            modes=("ReadWriteOncePod",)), pvc("solo", volume="a-1", modes=("ReadWriteOncePod",))]  # fmt: skip
    docs += [with_claims(pod("holder", node_name="a", priority=0), "solo")]
    low = with_claims(pod("low", priority=0), "solo")
    r = results(*docs, low)["low"]
    assert reason_counts(r) == {volumerestrictions.ERR_REASON_RWOP_CONFLICT: 2}
    high = with_claims(pod("high", priority=100), "solo")
    out = results(*docs, high)
    assert out["high"].node == "a"
    assert [v.name for v in out["high"].preempted] == ["holder"]


def test_in_tree_disk_conflict() -> None:
    disk = {"pdName": "shared-pd"}
    docs = [node("a"), node("b"), with_claims(pod("holder", node_name="a"), gcePersistentDisk=disk)]
    r = results(*docs, with_claims(pod("p"), gcePersistentDisk=disk))["p"]
    assert r.node == "b"
    ro = {"pdName": "ro-pd", "readOnly": True}
    docs = [node("a"), with_claims(pod("holder", node_name="a"), gcePersistentDisk=ro)]
    assert results(*docs, with_claims(pod("p"), gcePersistentDisk=ro))["p"].node == "a"  # both read-only
    docs = [node("a"), with_claims(pod("holder", node_name="a"), awsElasticBlockStore={"volumeID": "vol-1"})]
    r = results(*docs, with_claims(pod("p"), awsElasticBlockStore={"volumeID": "vol-1"}))["p"]
    assert reason_counts(r) == {volumerestrictions.ERR_REASON_DISK_CONFLICT: 1}


def test_csi_attach_limit_counts_unique_volumes_on_the_node() -> None:
    driver = "ebs.csi.aws.com"
    docs = [node("a"), node("b"), storage_class("ebs", driver, wffc=False)]
    docs += [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
              "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": 1}}]}}
             for name in ("a", "b")]  # fmt: skip
    for i in (1, 2):
        docs += [
            pv(f"pv{i}", sc="ebs", csi=(driver, f"vol-{i}"), claim=("default", f"c{i}"), modes=("ReadWriteMany",)),
            pvc(f"c{i}", sc="ebs", volume=f"pv{i}", modes=("ReadWriteMany",)),
        ]
    docs += [with_claims(pod("holder", node_name="a"), "c1")]
    # A second volume of the driver: node a is full, node b has room.
    r = results(*docs, with_claims(pod("p", node_selector={HOSTNAME: "a"}), "c2"))["p"]
    assert reason_counts(r) == {"node(s) didn't match Pod's node affinity/selector": 1,
                                ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: 1}  # fmt: skip
    # The same volume again is not a new attachment.
    assert results(*docs, with_claims(pod("p", node_selector={HOSTNAME: "a"}), "c1"))["p"].node == "a"


def test_pv_zone_label_must_match_the_node() -> None:
    docs = [node("a", labels={ZONE: "za"}), node("b", labels={ZONE: "zb"}), node("bare"), storage_class()]
    docs += [pv("z", labels={ZONE: "za__zc"}, claim=("default", "c")), pvc("c", volume="z")]
    session = start(*docs, with_claims(pod("p", node_selector={HOSTNAME: "b"}), "c"))
    (r,) = session.schedule()
    assert reason_counts(r)[volumezone.ERR_REASON_CONFLICT] == 1  # b; "bare" has no zone label and passes
    assert reason_counts(r)["node(s) didn't match Pod's node affinity/selector"] == 2


def test_bad_storage_objects_are_input_errors_naming_the_field() -> None:
    bad = pv("x")
    del bad["spec"]["capacity"]
    with pytest.raises(InputError) as exc:
        start(node("a"), bad)
    assert exc.value.field == "spec.capacity[storage]"
    assert "PersistentVolume x" in str(exc.value)
    claim = pvc("c", modes=("ReadWriteOncePod", "ReadWriteOnce"))
    with pytest.raises(InputError, match="ReadWriteOncePod"):
        start(node("a"), claim)
    with pytest.raises(InputError) as exc:
        start(node("a"), with_claims(pod("p"), ""))
    assert exc.value.field == "spec.volumes[0].persistentVolumeClaim.claimName"


def test_ephemeral_volume_claim_must_exist_and_belong_to_the_pod() -> None:
    p = pod("p")
    p["metadata"]["uid"] = "uid-p"
    p["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    r = results(node("a"), storage_class(), p)["p"]
    assert filter_message(r) == (
        "0/1 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim "
        '"p-scratch".'
    )
    claim = pvc("p-scratch")
    r = results(node("a"), storage_class(), pv("a-1", on="a"), claim, p)["p"]
    assert filter_message(r) == "0/1 nodes are available: PVC default/p-scratch was not created for pod default/p " \
                                "(pod is not owner)."  # fmt: skip
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
                                             "controller": True}]  # fmt: skip
    assert results(node("a"), node("b"), storage_class(), pv("a-1", on="a"), claim, p)["p"].node == "a"


def test_bound_claim_whose_pv_is_gone() -> None:
    docs = [node("a"), storage_class(), pvc("c", volume="gone"), with_claims(pod("p"), "c")]
    r = results(*docs)["p"]
    assert filter_message(r) == '0/1 nodes are available: persistentvolume "gone" not found.'  # VolumeZone's PreFilter
    session = start(*docs, config=None)
    profile = session.scheduler.config.profiles["default-scheduler"]
    profile.points["preFilter"] = [pl for pl in profile.at("preFilter") if pl.name != "VolumeZone"]
    (r,) = session.schedule()
    assert reason_counts(r) == {volumebinding.ERR_REASON_PV_NOT_EXIST: 1}


def test_a_pv_pre_bound_to_the_claim_wins_over_a_smaller_one() -> None:
    docs = [node("a"), node("b"), storage_class(), pv("a-small", "20Gi", on="a")]
    docs += [pv("b-big", "900Gi", on="b", claim=("default", "c")), pvc("c"), with_claims(pod("p"), "c")]
    assert results(*docs)["p"].node == "b"


def test_each_pv_serves_one_claim_of_a_pod() -> None:
    docs = [node("a"), node("b"), storage_class()]
    docs += [pv("a-1", "50Gi", on="a"), pv("b-1", "50Gi", on="b"), pv("b-2", "60Gi", on="b")]
    docs += [pvc("c1", "40Gi"), pvc("c2", "40Gi"), with_claims(pod("p"), "c1", "c2")]
    session = start(*docs)
    (r,) = session.schedule()
    assert r.node == "b"  # node a has one PV for two claims
    volumes = volume_state(session.cluster)
    assert {volumes.volume(n).claim_ref.name for n in ("b-1", "b-2")} == {"c1", "c2"}


def test_volume_binding_args() -> None:
    assert volumebinding.new({"bindTimeoutSeconds": 30}, None).bind_timeout == 30
    with pytest.raises(InputError, match="StorageCapacityScoring"):
        volumebinding.new({"shape": [{"utilization": 0, "score": 10}]}, None)
    with pytest.raises(InputError):
        volumebinding.new({"bindTimeoutSeconds": -1}, None)
