"""charts/accelsched installed with the real Helm v4 on the real node: every part runs as a pod, as an operator runs it.

`make chart-e2e` runs this module alone (`make node-e2e` leaves it out: it builds the image). Real components: the
node of realnode.py (kube-apiserver + etcd, kubelet v1.36.3, containerd + runc + CNI), kube-controller-manager
v1.36.3 with the controllers a Deployment and a DaemonSet need, kube-scheduler v1.36.3 for the chart's own pods (the
default scheduler accelsched runs beside), kube-proxy v1.36.3 in iptables mode, Helm v4.3.2,
and the accelsched image built from the root Dockerfile (chartkit.py). Nothing runs as a host process but those:
the scheduler, the device plugin, the DRA driver and the UI are the chart's pods, on in-cluster credentials
(service-account token, ``kube-root-ca.crt``, the ``kubernetes`` Service through kube-proxy).

The tests run in order on one release: install; workload pods with ``schedulerName: accelsched`` bound by the
in-cluster scheduler and given the in-cluster device plugin's devices; a DRA claim prepared by the in-cluster driver;
`helm upgrade` with a changed config and `helm rollback` (the scheduler's and the plugin's pods are replaced, the
running workloads keep their containers and devices); `helm uninstall` (nothing of the release is left).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chartkit
import helmkit
import nodekit as nk
import podkit
import pytest
import yaml
from controlplane import ControlPlaneError, build_controlplane, ensure_namespace
from dpkit import wait_capacity
from realnode import NodeContext

pytestmark = pytest.mark.chart

RELEASE = "accelsched"
NAMESPACE = "accelsched-system"
RESOURCE = "qualcomm.com/ai-accelerator"
ENV_VAR = "QAIC_VISIBLE_DEVICES"
DRA_DRIVER = "dra.accelsched.io"
COMPONENTS = {"scheduler", "ui", "device-plugin", "dra-driver"}


@dataclass
class Devices:
    """What podkit.evidence reads of a device plugin: its resource and the variable its Allocate sets."""

    resource: str = RESOURCE
    env_var: str = ENV_VAR


@dataclass
class Chart:
    node: NodeContext
    helm_bin: Path
    workdir: Path
    values: Path
    image: str

    def helm(self, *args: str) -> str:
        proc = helmkit.helm(self.helm_bin, self.node.control_plane.kubeconfig, self.workdir, *args)
        assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stderr}\n{self.diagnose()}"
        return proc.stdout

    def diagnose(self) -> str:
        """Each of the release's pods: phase, node, its containers' states, and its log's last lines."""
        lines = []
        for pod in self.objects().get("Pod", {}).values():
            states = [
                f"{c.name} ready={c.ready} restarts={c.restart_count} {c.state}"
                for c in pod.status.container_statuses or []
            ]
            lines.append(f"{pod.metadata.name}: {pod.status.phase} on {pod.spec.node_name}: {'; '.join(states)}")
            with contextlib.suppress(Exception):
                lines.extend("    " + line for line in self.pod_log(pod).splitlines()[-5:])
        return "\n".join(lines)

    def objects(self) -> dict[str, Any]:
        return helmkit.release_objects(self.node.api, NAMESPACE, RELEASE)

    def pods(self) -> dict[str, Any]:
        """The release's pods by component (one node: one pod each), waiting until each component has exactly one
        pod that is Running and ready (a rollout's old pods are gone)."""

        def settled() -> dict[str, Any] | None:
            pods = self.objects().get("Pod", {}).values()
            by = {
                p.metadata.labels["app.kubernetes.io/component"]: p for p in pods if not p.metadata.deletion_timestamp
            }
            if len(list(pods)) != len(COMPONENTS) or set(by) != COMPONENTS:
                return None
            ready = all(
                p.status.phase == "Running" and all(c.ready for c in p.status.container_statuses or [])
                for p in by.values()
            )
            return by if ready else None

        return nk.wait_for("one Running, ready pod per chart component", settled, timeout=240)

    def pod_log(self, pod: Any) -> str:
        return str(self.node.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE))


def _fail(message: str) -> None:
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def chart(node: NodeContext, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    workdir = Path(tmp_path_factory.mktemp("chart"))
    failure = ""
    with contextlib.ExitStack() as stack:
        try:
            helm_bin = build_controlplane(workdir / "build-helm.log", "helm") / "helm"
            proxy_bin = build_controlplane(workdir / "build-kube-proxy.log", "kube-proxy") / "kube-proxy"
            image, archive = chartkit.image_archive(workdir / "build-image.log")
            node.containerd.import_image(archive)
            assert image in node.containerd.images(), f"{archive} imported, but containerd has no {image}"
            stack.enter_context(chartkit.controller_manager(node.control_plane))
            stack.enter_context(chartkit.default_scheduler(node.control_plane, workdir / "kube-scheduler"))
            proxy = chartkit.KubeProxy(
                workdir / "kube-proxy", proxy_bin, node.control_plane.kubeconfig, node.name, node.containerd.subnet
            )
            stack.callback(proxy.stop)
            proxy.start()
        except (ControlPlaneError, nk.NodeError, AssertionError) as e:
            failure = f"setting up the chart's cluster failed: {e}"
        if failure:
            _fail(failure)
        repository, tag = image.rsplit(":", 1)
        values = {
            # Imported into containerd, there is no registry: never pull.
            "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
            # No accelerator on a CI machine: the plugin's fake source, 4 devices behind /dev/accel/accel0..3.
            "devicePlugin": {"config": {"source": "fake", "fake": {"devices": 4}}},
            "draDriver": {
                "enabled": True,
                "kubeletDir": str(node.kubelet.root_dir),
                "extraArgs": ["--fake", "2"],
                "interval": 1,
            },
        }
        path = workdir / "values.yaml"
        path.write_text(yaml.safe_dump(values, sort_keys=False))
        c = Chart(node, helm_bin, workdir, path, image)
        yield c
        # Whatever a failed test left: the release and its namespace.
        helmkit.helm(helm_bin, node.control_plane.kubeconfig, workdir, "uninstall", RELEASE, "-n", NAMESPACE, "--wait")


@pytest.fixture(scope="module")
def workloads(chart: Chart) -> Iterator[str]:
    """A namespace for the workload pods, kept across the module's tests (they outlive upgrade and rollback)."""
    node = chart.node
    name = f"work-{uuid.uuid4().hex[:6]}"
    ensure_namespace(node.api, name)
    yield name
    node.core.delete_collection_namespaced_pod(name, grace_period_seconds=1)
    nk.wait_for(f"the kubelet to remove the pods of {name}", lambda: not node.core.list_namespaced_pod(name).items, 90)
    node.core.delete_namespace(name)


def scheduled_by(chart: Chart, namespace: str, pod: str) -> str:
    """The reportingInstance of the pod's Scheduled event: ``accelsched-<hostname>``, the scheduler's pod name in
    a pod (client-go's recorder, accelsched/live/events.py)."""
    from kubernetes import client

    def event() -> str | None:
        # Raw JSON: the client's model refuses the kubelet's events, whose eventTime is null.
        resp = client.EventsV1Api(chart.node.api).list_namespaced_event(
            namespace, field_selector=f"regarding.name={pod}", _preload_content=False
        )
        items = json.loads(resp.data)["items"]
        return next((e.get("reportingInstance") for e in items if e.get("reason") == "Scheduled"), None)

    return str(nk.wait_for(f"the Scheduled event of {namespace}/{pod}", event, timeout=60))


def run_workload(chart: Chart, namespace: str, name: str, count: int, test: str) -> podkit.Evidence:
    """Create a probe pod for ``count`` devices with schedulerName accelsched; check the in-cluster scheduler bound
    it and the container got the devices it chose; record it for the summary line."""
    node = chart.node
    node.core.create_namespaced_pod(namespace, podkit.probe_pod(name, RESOURCE, count))
    ev = podkit.evidence(node, Devices(), namespace, name)
    scheduler = chart.pods()["scheduler"].metadata.name
    instance = scheduled_by(chart, namespace, name)
    in_cluster = instance == f"accelsched-{scheduler}"
    podkit.record(test, ev, in_cluster=in_cluster)
    assert in_cluster, f"{namespace}/{name} was scheduled by {instance}, not by the chart's pod {scheduler}"
    assert ev.agree and len(ev.annotation) == count, ev
    assert sorted(ev.device_nodes) == sorted(f"/dev/accel/accel{d.rsplit('-', 1)[1]}" for d in ev.annotation), ev
    return ev


@dataclass
class Running:
    uid: str
    container: str
    restarts: int
    devices: list[str]


def running(chart: Chart, namespace: str) -> dict[str, Running]:
    out = {}
    for pod in chart.node.core.list_namespaced_pod(namespace).items:
        if pod.status.phase != "Running":
            continue
        status = pod.status.container_statuses[0]
        devices = podkit.checkpoint_devices(pod.metadata.uid, RESOURCE)
        out[pod.metadata.name] = Running(pod.metadata.uid, status.container_id, status.restart_count, devices)
    return out


def test_helm_install_runs_every_pod_on_the_real_node(chart: Chart) -> None:
    out = chart.helm(
        "install",
        RELEASE,
        str(helmkit.CHART),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "-f",
        str(chart.values),
        "--wait",
        "--timeout",
        "5m",
    )
    assert f"is installed as release {RELEASE} in namespace {NAMESPACE}" in out  # NOTES.txt
    pods = chart.pods()
    node = chart.node
    for component, pod in pods.items():
        assert pod.spec.node_name == node.name, component
        assert pod.spec.containers[0].image == chart.image, component
        # In-cluster credentials: the token volume the serviceaccount admission added, mounted from kube-root-ca.crt.
        assert any(v.name.startswith("kube-api-access-") for v in pod.spec.volumes), component
    # Each reached the API server from its pod, through the kubernetes Service: the plugin's devices are in the
    # Node status and its annotation, the scheduler holds its lease, the DRA driver published its slice.
    wait_capacity(node, RESOURCE, 4)
    devices = json.loads(node.read_node().metadata.annotations["accelsched.io/devices"])
    assert sorted(devices[RESOURCE]) == [f"ai-accelerator-{i}" for i in range(4)]
    from kubernetes import client

    lease = client.CoordinationV1Api(node.api).read_namespaced_lease(f"{RELEASE}-scheduler", NAMESPACE)
    assert lease.spec.holder_identity == pods["scheduler"].metadata.name

    def slices() -> list[Any]:
        items = client.ResourceV1Api(node.api).list_resource_slice().items
        return [s for s in items if s.spec.driver == DRA_DRIVER and s.spec.node_name == node.name]

    published = nk.wait_for("the in-cluster DRA driver's ResourceSlice", slices, timeout=60)
    assert sum(len(s.spec.devices or []) for s in published) >= 2


def test_the_in_cluster_scheduler_binds_pods_with_the_in_cluster_plugins_devices(chart: Chart, workloads: str) -> None:
    test = "test_the_in_cluster_scheduler_binds_pods_with_the_in_cluster_plugins_devices"
    first = run_workload(chart, workloads, "two", 2, test)
    second = run_workload(chart, workloads, "one", 1, test)
    assert not set(first.annotation) & set(second.annotation)


def test_helm_upgrade_and_rollback_keep_running_pods_and_their_devices(chart: Chart, workloads: str) -> None:
    test = "test_helm_upgrade_and_rollback_keep_running_pods_and_their_devices"
    before = running(chart, workloads)
    assert set(before) == {"two", "one"}, "the previous test's pods"
    old = {c: p.metadata.name for c, p in chart.pods().items()}

    # A changed scheduler config and plugin config: both roll their pods; the running workloads stay as they are.
    changed = [
        "--set",
        "scheduler.config.podMaxBackoffSeconds=30",
        "--set",
        "devicePlugin.config.healthIntervalSeconds=3",
    ]
    chart.helm("upgrade", RELEASE, str(helmkit.CHART), "-n", NAMESPACE, "-f", str(chart.values), *changed, "--wait")
    upgraded = {c: p.metadata.name for c, p in chart.pods().items()}
    assert upgraded["scheduler"] != old["scheduler"] and upgraded["device-plugin"] != old["device-plugin"]
    assert "podMaxBackoffSeconds: 30" in chart.objects()["ConfigMap"][f"{RELEASE}-scheduler"].data["config.yaml"]
    wait_capacity(chart.node, RESOURCE, 4)  # the new plugin pod registered again
    assert running(chart, workloads) == before
    # The new scheduler pod binds the next pod onto the one device left.
    third = run_workload(chart, workloads, "after-upgrade", 1, test)
    assert not set(third.annotation) & {d for r in before.values() for d in r.devices}

    chart.helm("rollback", RELEASE, "1", "-n", NAMESPACE, "--wait")
    rolled = {c: p.metadata.name for c, p in chart.pods().items()}
    assert rolled["scheduler"] != upgraded["scheduler"] and rolled["device-plugin"] != upgraded["device-plugin"]
    assert "podMaxBackoffSeconds: 30" not in chart.objects()["ConfigMap"][f"{RELEASE}-scheduler"].data["config.yaml"]
    wait_capacity(chart.node, RESOURCE, 4)
    kept = running(chart, workloads)
    assert {k: kept[k] for k in before} == before
    chart.node.core.delete_namespaced_pod("after-upgrade", workloads, grace_period_seconds=1)
    nk.wait_for("the kubelet to remove after-upgrade", lambda: "after-upgrade" not in running(chart, workloads), 90)
    fourth = run_workload(chart, workloads, "after-rollback", 1, test)
    assert fourth.annotation == third.annotation  # the device the removed pod gave back


def test_a_dra_claim_is_prepared_by_the_in_cluster_driver(chart: Chart, workloads: str) -> None:
    from kubernetes import client

    node = chart.node
    resource = client.ResourceV1Api(node.api)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "accelerator.accelsched.io"}}]}
            }
        },
    }
    resource.create_namespaced_resource_claim_template(workloads, template)
    pod = podkit.probe_pod("dra", RESOURCE, 0)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    node.core.create_namespaced_pod(workloads, pod)
    running_pod = podkit.wait_running(node, workloads, "dra")
    claim_name = running_pod.status.resource_claim_statuses[0].resource_claim_name
    claim = resource.read_namespaced_resource_claim(claim_name, workloads)
    results = claim.status.allocation.devices.results
    assert [r.driver for r in results] == [DRA_DRIVER] and results[0].pool == node.name
    scheduler = chart.pods()["scheduler"].metadata.name
    instance = scheduled_by(chart, workloads, "dra")
    # The kubelet ran the pod only after the in-cluster driver prepared the claim: its log says so for this claim.
    driver_log = chart.pod_log(chart.pods()["dra-driver"])
    prepared = claim.metadata.uid in driver_log
    ev = podkit.Evidence(f"{workloads}/dra", [results[0].device], [], [], {})
    podkit.record(
        "test_a_dra_claim_is_prepared_by_the_in_cluster_driver",
        ev,
        in_cluster=instance == f"accelsched-{scheduler}",
        agree=prepared,
    )
    assert instance == f"accelsched-{scheduler}"
    assert prepared, f"the driver's log does not name claim {claim.metadata.uid}:\n{driver_log[-2000:]}"


def test_helm_uninstall_leaves_nothing_behind(chart: Chart, workloads: str) -> None:
    from kubernetes import client

    node = chart.node
    # The workloads go first, while the driver can still unprepare their claims (without it the kubelet cannot
    # finish a DRA pod: a driver is uninstalled after the workloads that use it).
    node.core.delete_collection_namespaced_pod(workloads, grace_period_seconds=1)
    nk.wait_for(
        "the kubelet to remove the workload pods", lambda: not node.core.list_namespaced_pod(workloads).items, 90
    )
    chart.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    # The garbage collector removes what the Deployments and DaemonSets owned; the kubelet stops their pods.
    nk.wait_for("nothing of the release in the API server", lambda: chart.objects() == {}, timeout=120)
    # On the node: the plugin's socket and the driver's registration went with their pods, and so did the CDI
    # specs of the claims it prepared.
    leftovers = {p.name for p in nk.DEVICE_PLUGIN_DIR.iterdir()} - {"kubelet.sock", "kubelet_internal_checkpoint"}
    assert not leftovers
    registry = node.kubelet.root_dir / "plugins_registry"
    assert not list(registry.iterdir())
    cdi = [p for p in Path("/var/run/cdi").glob("*") if DRA_DRIVER in p.read_text(errors="replace")]
    assert not cdi

    def slices() -> list[Any]:
        return [s for s in client.ResourceV1Api(node.api).list_resource_slice().items if s.spec.driver == DRA_DRIVER]

    nk.wait_for("the driver's ResourceSlices to go", lambda: not slices(), timeout=90)
