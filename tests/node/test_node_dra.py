"""``accelsched dra-driver`` on the real kubelet v1.36.3 (DynamicResourceAllocation is GA, on by default): the
kubelet's plugin watcher registers it, and for a pod with an allocated ResourceClaim the kubelet calls its
NodePrepareResources before starting the pod and NodeUnprepareResources after the pod is gone.

The driver runs from deploy/dra/driver.yaml's container command, as a host process like the device plugin's tests
(tests/node/dpkit.py); what differs is named here: the fake inventory instead of /host sysfs, the kubelet's
``--root-dir`` folders, a CDI folder of the test's, and a 1 s rescan. No scheduler runs: the test writes the
allocation and ``reservedFor`` as kube-scheduler's PreBind would. containerd 1.6 on this machine predates CDI, so the
runtime does not apply the CDI edits; what is checked is the kubelet <-> driver contract (the prepared devices, the
CDI spec written and removed, the checkpoint), and that a kubelet restart (which wipes the node's slices) leaves
the driver registered and its slices published again.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import nodekit as nk
import yaml

from accelsched.dra.driver.checkpoint import Checkpoint
from accelsched.dra.driver.prepare import RESOURCE_CLAIMS
from accelsched.dra.driver.publish import RESOURCE_SLICES
from accelsched.live.kube import Kube, api_client

DRIVER_YAML = nk.REPO / "deploy" / "dra" / "driver.yaml"
DRIVER = "dra.accelsched.io"


def driver_argv(node_name: str, root_dir: Path, workdir: Path, kubeconfig: Path) -> list[str]:
    ds = next(d for d in yaml.safe_load_all(DRIVER_YAML.read_text()) if d and d["kind"] == "DaemonSet")
    command = list(ds["spec"]["template"]["spec"]["containers"][0]["command"])
    args = [re.sub(r"\$\(NODE_NAME\)", node_name, a) for a in command]
    i = args.index("--sysfs-root")
    del args[i : i + 2]  # no accelerators on a CI machine: a fake inventory instead
    i = args.index("--interval")
    del args[i : i + 2]
    args[0] = str(Path(sys.executable).parent / args[0])
    fake = workdir / "fake.yaml"
    fake.write_text("devices: 2\nnics: 1\n")
    flags = {
        "--fake-inventory": fake,
        "--interval": 1,
        "--plugins-dir": root_dir / "plugins",
        "--registry-dir": root_dir / "plugins_registry",
        "--cdi-dir": workdir / "cdi",
        "--kubeconfig": kubeconfig,
    }
    return [*args, *(str(x) for flag, value in flags.items() for x in (flag, value))]


def test_the_kubelet_prepares_and_unprepares_a_pods_claim(node: Any, ns: str, tmp_path: Path) -> None:
    kube = Kube(api_client(str(node.control_plane.kubeconfig)))
    log = tmp_path / "dra-driver.log"
    root = node.kubelet.root_dir
    proc = nk.spawn(driver_argv(node.name, root, tmp_path, node.control_plane.kubeconfig), log)
    checkpoint = root / "plugins" / DRIVER / "checkpoint.json"
    try:

        def registered() -> bool:
            if proc.poll() is not None:
                raise nk.NodeError(f"the DRA driver exited ({proc.returncode}):\n{nk.tail(log)}")
            return "registered with the kubelet" in log.read_text(errors="replace")

        nk.wait_for("the DRA driver to register with the kubelet", registered, timeout=60)

        def slices() -> list[str]:
            items = kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node.name}")["items"]
            return sorted(d["name"] for s in items for d in s["spec"].get("devices", []))

        nk.wait_for("the driver's ResourceSlices", lambda: slices() == ["gpu-0", "gpu-1", "nic-0"], timeout=60)

        claim = kube.create(
            RESOURCE_CLAIMS,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "gpu", "namespace": ns},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "accelerator.accelsched.io"}}]
                    }
                },
            },
            ns,
        )
        results = [{"request": "gpu", "driver": DRIVER, "pool": node.name, "device": "gpu-1"}]
        claim["status"] = {"allocation": {"devices": {"results": results}}}
        claim = kube.request("PUT", RESOURCE_CLAIMS.path(ns, "gpu", "status"), body=claim)
        pod = node.core.create_namespaced_pod(
            ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "with-claim"},
                "spec": {
                    "nodeName": node.name,
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                    "containers": [
                        {
                            "name": "probe",
                            "image": nk.PROBE_IMAGE,
                            "imagePullPolicy": "Never",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        )
        # kube-scheduler's PreBind: the claim is reserved for the pod (the kubelet refuses a claim not reserved).
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": "with-claim", "uid": pod.metadata.uid}]
        kube.request("PUT", RESOURCE_CLAIMS.path(ns, "gpu", "status"), body=claim)
        uid = claim["metadata"]["uid"]

        def running() -> bool:
            return node.core.read_namespaced_pod("with-claim", ns).status.phase == "Running"

        nk.wait_for("the pod with the claim to run", running, timeout=120)
        prepared = Checkpoint(str(checkpoint)).claims
        assert [d.device for d in prepared[uid].devices] == ["gpu-1"]
        spec = json.loads((tmp_path / "cdi" / f"k8s.{DRIVER}-device_{uid}.json").read_text())
        assert [d["name"] for d in spec["devices"]] == [f"{uid}-gpu-1"]
        assert f"prepared {ns}/gpu ({uid}): gpu-1" in log.read_text()

        node.core.delete_namespaced_pod("with-claim", ns, grace_period_seconds=1)
        nk.wait_for(
            "the kubelet to unprepare the claim",
            lambda: uid not in Checkpoint(str(checkpoint)).claims,
            timeout=120,
        )
        assert not (tmp_path / "cdi" / f"k8s.{DRIVER}-device_{uid}.json").exists()
        assert f"unprepared {ns}/gpu ({uid})" in log.read_text()

        # A kubelet restart wipes the node's ResourceSlices and forgets every plugin; its plugin watcher finds the
        # driver's socket again and the driver's next rescan publishes the slices again.
        node.restart_kubelet()
        node.untaint_not_ready()
        nk.wait_for(
            "the restarted kubelet to register the driver again",
            lambda: log.read_text(errors="replace").count("registered with the kubelet") >= 2,
            timeout=60,
        )
        nk.wait_for("the slices to be published again", lambda: slices() == ["gpu-0", "gpu-1", "nic-0"], timeout=60)
    finally:
        nk.stop_process(proc)
        for s in kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node.name}")["items"]:
            kube.delete(RESOURCE_SLICES, s["metadata"]["name"])
        kube.api.close()
