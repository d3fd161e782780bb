"""Where ``simulate`` runs its policy x seed experiments: this machine's process pool, or a Ray cluster.

``--executor local`` (the default) is ``replay.run_matrix``: forked processes, ``--jobs`` of them. ``--executor
ray:HOST:PORT`` sends one Ray task per experiment to the cluster whose GCS listens there (``ray start --head``
prints it; ``ray://HOST:PORT`` goes through Ray Client instead). The driver loads the trace once and puts it in
the object store, so worker nodes need the same accelsched version installed but not the trace files. Each
experiment is a pure function of (trace, policy, seed, inflation, tie-break), and the results are collected by
task, not by completion, so ``summary.csv`` and ``curves.csv`` come out byte for byte as a local run writes them.

Ray is an optional extra (``pip install 'accelsched[ray]'``). Everything that can go wrong before the first task
(no Ray, a malformed address, nothing listening, something that is not a Ray GCS) is bad input: one line, exit 2,
within ``CONNECT_TIMEOUT_S``, because ``ray.init`` itself retries an unreachable GCS for many minutes.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import accelsched
from accelsched.errors import InputError
from accelsched.sim.fragmentation import TypicalPods, trace_typical_pods
from accelsched.sim.replay import Experiment, run_experiment, run_matrix
from accelsched.sim.trace import Nodes, Pods, load_nodes, load_pods

FIELD = "--executor"
INSTALL_HINT = "pip install 'accelsched[ray]'"
CONNECT_TIMEOUT_S = 10.0
RAY_CLIENT_SCHEME = "ray://"

Progress = Callable[[Experiment], None]


class Executor(Protocol):
    """Runs every policy x seed of one trace; returns the experiments in (policy, seed) task order."""

    remote: bool

    def run_matrix(
        self,
        node_path: str,
        pod_path: str,
        policies: Sequence[str],
        seeds: Sequence[int],
        inflation: float,
        progress: Progress | None,
        tie_break: str,
    ) -> list[Experiment]: ...


@dataclass(frozen=True)
class LocalExecutor:
    """Today's process pool (``replay.run_matrix``): ``jobs`` forked processes, default one per CPU."""

    jobs: int | None = None
    remote: bool = False

    def run_matrix(self, node_path, pod_path, policies, seeds, inflation, progress, tie_break) -> list[Experiment]:
        return run_matrix(node_path, pod_path, policies, seeds, inflation, self.jobs, progress, tie_break)


def _experiment_on_worker(
    trace: tuple[Nodes, Pods, TypicalPods], policy: str, seed: int, inflation: float, tie_break: str, version: str
) -> Experiment:
    """One Ray task. Refuses to run on a worker with another accelsched: its figures would not be this run's."""
    if accelsched.__version__ != version:
        raise RuntimeError(f"this worker has accelsched {accelsched.__version__}, the driver {version}")
    nodes, pods, typical = trace
    return run_experiment(nodes, pods, policy, seed, inflation, typical, tie_break)


@dataclass(frozen=True)
class RayExecutor:
    """One Ray task per experiment on the cluster at ``address`` (``HOST:PORT`` of its GCS, or ``ray://...``)."""

    address: str
    remote: bool = True

    def run_matrix(self, node_path, pod_path, policies, seeds, inflation, progress, tie_break) -> list[Experiment]:
        ray = _import_ray()
        tasks = [(p, s) for p in policies for s in seeds]
        nodes, pods = load_nodes(node_path), load_pods(pod_path)
        trace = (nodes, pods, trace_typical_pods(pods, nodes.models))
        _connect(ray, self.address)
        try:
            if ray.cluster_resources().get("CPU", 0) < 1:
                raise InputError(f"the Ray cluster at {self.address} has no CPUs to run on", field=FIELD)
            experiment = ray.remote(num_cpus=1)(_experiment_on_worker)
            shared = ray.put(trace)
            pending = {
                experiment.remote(shared, p, s, inflation, tie_break, accelsched.__version__): i
                for i, (p, s) in enumerate(tasks)
            }
            results: list[Experiment | None] = [None] * len(tasks)
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    results[i] = _result(ray, ref, self.address, tasks[i])
                    if progress is not None:
                        progress(results[i])
            return [r for r in results if r is not None]
        finally:
            ray.shutdown()


def make_executor(text: str, jobs: int | None) -> LocalExecutor | RayExecutor:
    """``local``, ``ray`` (the cluster in $RAY_ADDRESS), or ``ray:HOST:PORT`` / ``ray:ray://HOST:PORT``.
    Checked with the other options, before anything is loaded: Ray must be importable, the address well formed
    and answering."""
    kind, _, address = text.strip().partition(":")
    if kind == "local" and not address:
        return LocalExecutor(jobs)
    if kind != "ray":
        raise InputError(f"{text!r} is not local, ray or ray:HOST:PORT", field=FIELD)
    if jobs is not None:
        raise InputError("counts local processes; with --executor ray the cluster's CPUs decide", field="--jobs")
    _import_ray()
    address = address or os.environ.get("RAY_ADDRESS", "")
    if not address:
        raise InputError(
            "name the cluster: ray:HOST:PORT (what `ray start --head` prints) or set RAY_ADDRESS", field=FIELD
        )
    _check_reachable(address)
    return RayExecutor(address)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(f"Ray is not installed: {INSTALL_HINT}", field=FIELD) from None
    return ray


def _split_address(address: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST:PORT``; anything else is bad input."""
    rest = address.removeprefix(RAY_CLIENT_SCHEME)
    host, sep, port_text = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536 or "/" in host:
        raise InputError(f"{address!r} is not HOST:PORT (e.g. 127.0.0.1:6379) or ray://HOST:PORT", field=FIELD)
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InputError(f"{address!r}: {host!r} is not a host name or IP address", field=FIELD) from None
    return host, int(port_text)


def _check_reachable(address: str) -> None:
    """Ask the address what it is, within CONNECT_TIMEOUT_S: a GCS answers GetClusterId; ``ray.init`` alone would
    retry a dead or foreign address for minutes. Ray Client (``ray://``) has its own bounded retries."""
    import grpc

    host, port = _split_address(address)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        if address.startswith(RAY_CLIENT_SCHEME):
            try:
                grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
            except grpc.FutureTimeoutError:
                raise InputError(f"no Ray Client server answers at {address}", field=FIELD) from None
            return
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=CONNECT_TIMEOUT_S)
        except grpc.RpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise InputError(
                    f"no Ray cluster answers at {address} within {CONNECT_TIMEOUT_S:.0f} s ({code.name.lower()})",
                    field=FIELD,
                ) from None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise InputError(f"{address} answers, but it is not a Ray cluster's GCS", field=FIELD) from None
            # Anything else (say UNAUTHENTICATED on a cluster with token auth) is a GCS talking: ray.init decides.


def _is_loopback(address: str) -> bool:
    """A GCS on this machine's loopback (not Ray Client, which takes no driver address)."""
    if address.startswith(RAY_CLIENT_SCHEME):
        return False
    host = _split_address(address)[0]
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _connect(ray: Any, address: str) -> None:
    import logging

    # This run's driver reports nothing to Ray's usage statistics (the cluster's own setting is the cluster's).
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        # A driver on the head's own loopback says so: Ray would otherwise take the host's interface address.
        loopback = {"_node_ip_address": "127.0.0.1"} if _is_loopback(address) else {}
        ray.init(
            address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=True, **loopback
        )
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... for the same thing
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot join the Ray cluster at {address}: {first}", field=FIELD) from None
    # Seen here under memory pressure: after a Ray worker was killed mid-run, the driver finished every file, then
    # ended with status 0 before Python flushed a piped stdout, and `-o json` printed nothing. Line buffering puts
    # each line out as it is written.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)


def _result(ray: Any, ref: Any, address: str, task: tuple[str, int]) -> Experiment:
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None) or exc
        first = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
        raise InputError(
            f"the Ray cluster at {address} failed experiment {task[0]} seed {task[1]}: {first}", field=FIELD
        ) from None
