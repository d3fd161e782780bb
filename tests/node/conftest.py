"""Fixtures for the real-node tests: a control plane, containerd and the real kubelet, and the device plugin.

Every test here is marked ``integration`` and ``node``. `make node-e2e` runs them (and `.ci/run` through it);
`make test` leaves them out (``-m "integration and not node"``), so a developer's run does not need root.
`make chart-e2e` runs test_chart_node.py (marked ``chart``: the image build, kube-controller-manager, kube-proxy);
`make node-e2e` runs the rest.
Where this machine cannot run containers (not root, no containerd/runc/CNI plugins), the tests skip naming what is
missing, unless ``ACCELSCHED_REQUIRE_NODE=1`` (`make node-e2e`, CI), where that is a failure. A build or start that
fails is always a failure, with the log tail.

Fixtures (one node for the whole session: the kubelet's device-plugins folder is fixed, so one kubelet at a time):
- ``node`` (session): a :class:`NodeContext`: control plane, containerd with the pause and probe images imported,
  a kubelet whose Node is Ready, an admin ApiClient;
- ``ns`` (function): a fresh namespace; at teardown its pods are deleted and the test waits until the kubelet
  has really removed them (their devices are free again for the next test);
- ``device_plugin`` (function): starts ``accelsched device-plugin`` the way its DaemonSet does, and stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(NODE_DIR), str(NODE_DIR.parent / "live")]  # controlplane.py: the test API server

import nodekit as nk  # noqa: E402
from controlplane import ControlPlaneError, ensure_namespace  # noqa: E402
from dpkit import DevicePlugin  # noqa: E402
from realnode import NodeContext, real_node  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "node: needs root, containerd and the real kubelet (make node-e2e)")
    config.addinivalue_line("markers", "chart: the Helm chart's pods on the real node (make chart-e2e alone)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if NODE_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.node)


def _fail(message: str) -> None:
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeContext]:
    missing = nk.missing_prerequisites()
    if missing:
        message = "this machine cannot run the node tests' containers: missing " + "; ".join(missing)
        if os.environ.get("ACCELSCHED_REQUIRE_NODE") == "1":
            _fail(message)
        pytest.skip(message)
    # Short paths: containerd's and the kubelet's unix sockets must stay under the 107-byte limit.
    workdir = Path(tmp_path_factory.mktemp("node"))
    failure = ""
    with contextlib.ExitStack() as stack:
        try:
            ctx = stack.enter_context(real_node(workdir))
        except (ControlPlaneError, nk.NodeError, AssertionError) as e:
            failure = f"starting the node failed: {e}"
        if failure:  # reported outside the except block: the log tail, not a chained traceback
            _fail(failure)
        yield ctx


@pytest.fixture
def ns(node: NodeContext) -> Iterator[str]:
    name = f"n-{uuid.uuid4().hex[:8]}"
    ensure_namespace(node.api, name)
    try:
        yield name
    finally:
        node.core.delete_collection_namespaced_pod(name, grace_period_seconds=1)
        # The kubelet stops the containers and then deletes each pod itself (status manager, grace period over).
        nk.wait_for(
            f"the kubelet to remove the pods of {name}",
            lambda: not node.core.list_namespaced_pod(name).items,
            timeout=90,
        )
        node.core.delete_namespace(name)


@pytest.fixture
def device_plugin(node: NodeContext, tmp_path: Path) -> Iterator[Callable[..., DevicePlugin]]:
    """``device_plugin(**config)`` starts the plugin from the DaemonSet's command with the ConfigMap's config
    (``config`` merged over it, e.g. ``fake={"numa": [0, 0, 1, 1]}``) and ``--source fake``."""
    started: list[DevicePlugin] = []

    def start(**config: Any) -> DevicePlugin:
        plugin = DevicePlugin(tmp_path / f"plugin-{len(started)}", node.name, node.control_plane.kubeconfig, config)
        started.append(plugin)
        plugin.start()
        return plugin

    try:
        yield start
    finally:
        for plugin in reversed(started):
            plugin.stop()


def accelsched_bin() -> str:
    """The ``accelsched`` console script of this interpreter's environment (the .venv), as a node would run it."""
    here = Path(sys.executable).parent / "accelsched"
    return str(here) if here.exists() else (shutil.which("accelsched") or "accelsched")


@pytest.fixture
def scheduler(node: NodeContext, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``scheduler(*args)`` runs ``accelsched run --kubeconfig ...`` as a process, as its Deployment does."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = tmp_path / f"accelsched-run-{len(procs)}.log"
        cmd = [accelsched_bin(), "run", "--kubeconfig", str(node.control_plane.kubeconfig), "--metrics-port", "0"]
        proc = nk.spawn([*cmd, *args], log)
        proc.log = log  # type: ignore[attr-defined]
        procs.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            nk.stop_process(proc)
