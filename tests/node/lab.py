"""`make lab-node`: the lab's device-plugin step (step 1 of `make demo`) on this machine's real kubelet.

It starts the test node (realnode.py: control plane, containerd, the kubelet v1.36.3), runs the device plugin from
deploy/device-plugin-daemonset.yaml's command with ``--source fake``, schedules one pod asking for one
``qualcomm.com/ai-accelerator`` with ``accelsched run``, and shows what the node advertises and what the running
container got. Everything is removed at the end. Where this machine cannot run containers it says exactly what is
missing and exits 2; a component that fails to start exits 1 with its log tail.

Usage: .venv/bin/python tests/node/lab.py   (as root; about 30 s once `make node` has built the kubelet)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent / "live")]

import nodekit as nk  # noqa: E402
import podkit  # noqa: E402
from controlplane import ControlPlaneError, ensure_namespace  # noqa: E402
from dpkit import DevicePlugin, wait_capacity  # noqa: E402
from realnode import real_node  # noqa: E402


def main() -> int:
    missing = nk.missing_prerequisites()
    if missing:
        print("lab-node: this machine cannot run containers for the lab: missing", file=sys.stderr)
        for m in missing:
            print(f"  - {m}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="lab-node-", dir="/tmp") as tmp:
        workdir = Path(tmp)
        try:
            return run(workdir)
        except (ControlPlaneError, nk.NodeError, AssertionError) as e:
            print(f"lab-node: {e}", file=sys.stderr)
            return 1


def run(workdir: Path) -> int:
    t0 = time.monotonic()
    print("Step 1 of the lab, on a real node: the cluster and its device plugin")
    with real_node(workdir) as node:
        print(f"  kubelet {node.read_node().status.node_info.kubelet_version} is up: Node {node.name} is Ready")
        plugin = DevicePlugin(workdir / "plugin", node.name, node.control_plane.kubeconfig)
        print(f"  device plugin, as the DaemonSet runs it: {' '.join(plugin.argv()[:4])} ... --source fake")
        plugin.start()
        scheduler = None
        try:
            n = wait_capacity(node, plugin.resource, 4)
            print(
                f"  {node.name} advertises {plugin.resource}: capacity {n.status.capacity[plugin.resource]}, "
                f"allocatable {n.status.allocatable[plugin.resource]}"
            )
            ensure_namespace(node.api, "lab")
            log = workdir / "accelsched-run.log"
            cmd = [
                str(Path(sys.executable).parent / "accelsched"),
                "run",
                "--kubeconfig",
                str(node.control_plane.kubeconfig),
                "--metrics-port",
                "0",
            ]
            scheduler = nk.spawn(cmd, log)
            node.core.create_namespaced_pod("lab", podkit.probe_pod("infer-0", plugin.resource, 1))
            ev = podkit.evidence(node, plugin, "lab", "infer-0")
            print(
                f"  pod lab/infer-0 asked for 1 {plugin.resource}; accelsched bound it to {node.name} with "
                f"{', '.join(ev.annotation)}"
            )
            print(
                f"  the kubelet's Allocate gave {', '.join(ev.checkpoint)}; the running container sees "
                f"{plugin.env_var}={','.join(ev.container)} and "
                + ", ".join(f"{p} ({w})" for p, w in sorted(ev.device_nodes.items()))
            )
            ok = ev.agree
            print(
                f"lab-node: {'the pod runs with the device accelsched chose' if ok else 'MISMATCH: ' + repr(ev)}"
                f" ({time.monotonic() - t0:.0f}s)"
            )
            node.core.delete_namespaced_pod("infer-0", "lab", grace_period_seconds=1)
            nk.wait_for(
                "the kubelet to remove lab/infer-0", lambda: not node.core.list_namespaced_pod("lab").items, timeout=90
            )
            return 0 if ok else 1
        finally:
            if scheduler is not None:
                nk.stop_process(scheduler)
            plugin.stop()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        print(f"lab-node: {e}", file=sys.stderr)
        sys.exit(1)
