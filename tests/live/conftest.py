"""Fixtures for tests against a real kube-apiserver + etcd (built by hack/build-controlplane.sh).

Every test collected under tests/live/ is marked ``integration``, so ``pytest -m "not integration"`` never builds or
starts the control plane. Without a Go toolchain (and no cached build) the tests skip saying so, except under CI
(tests/prereqs.py), where that fails; a control plane that cannot be built or started always fails the tests with
the log tail; only ``ACCELSCHED_SKIP_LIVE=1`` (a local opt-out) turns that into a skip.

Fixtures:
- ``control_plane`` (session): a started :class:`controlplane.ControlPlane` with the CRDs in deploy/crds applied.
- ``kube`` (function): a :class:`KubeContext`: an admin ``ApiClient``, a fresh namespace, ``make_node``; at teardown
  it deletes the namespace's pods and every Node and NodeResourceTopology, so each test starts from an empty cluster.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane import (
    ACCELERATOR,
    ControlPlane,
    ControlPlaneError,
    apply_crds,
    build_controlplane,
    ensure_namespace,
    find_binaries,
    make_node,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/prereqs.py
import prereqs

__all__ = ["ACCELERATOR", "ControlPlane", "KubeContext", "make_node"]

LIVE_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LIVE_DIR in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _unavailable(message: str) -> None:
    if os.environ.get("ACCELSCHED_SKIP_LIVE") == "1":
        pytest.skip(f"ACCELSCHED_SKIP_LIVE=1: {message}")
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if find_binaries() is None and (why := prereqs.no_go_toolchain()):
        prereqs.missing(why, "ACCELSCHED_SKIP_LIVE")
    workdir = tmp_path_factory.mktemp("controlplane")
    try:
        bin_dir = build_controlplane(workdir / "build.log")
    except ControlPlaneError as e:
        failure = f"building the control plane failed: {e}"
    else:
        failure = ""
    if failure:  # reported outside the except block so the report is the log tail, not a chained traceback
        _unavailable(failure)
    cp = ControlPlane(workdir, bin_dir)
    try:
        cp.start()
        from kubernetes import config

        with config.new_client_from_config(config_file=str(cp.kubeconfig)) as api:
            apply_crds(api)
    except ControlPlaneError as e:
        cp.stop()
        failure = f"starting the control plane failed: {e}"
    if failure:
        _unavailable(failure)
    try:
        yield cp
    finally:
        cp.stop()


@dataclass
class KubeContext:
    """One test's view of the shared control plane."""

    control_plane: ControlPlane
    api: Any  # kubernetes.client.ApiClient authenticated as admin
    namespace: str

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    def make_node(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        capacity: Mapping[str, str | int] | None = None,
        taints: Any = (),
        **kwargs: Any,
    ) -> Any:
        return make_node(self.api, name, labels, capacity, taints, **kwargs)


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubeContext]:
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    ensure_namespace(api, namespace)
    try:
        yield KubeContext(control_plane, api, namespace)
    finally:
        if control_plane.apiserver_pid is None:  # a test that killed the API server and failed before restarting it
            control_plane.start_apiserver()
        _clean(api, namespace)
        api.close()


def _clean(api: Any, namespace: str) -> None:
    """Remove what the next test must not see. There is no kubelet to finish a graceful delete and no namespace
    controller to empty a deleted namespace, so pods go with grace period 0 and cluster-scoped objects by name."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    core.delete_collection_node()
    try:
        client.CustomObjectsApi(api).delete_collection_cluster_custom_object(
            "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"
        )
    except ApiException as e:
        if e.status != 404:
            raise
    core.delete_namespace(namespace)
