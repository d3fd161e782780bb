"""A real Prometheus (v0.316.0, built from its Go module) scraping a running `accelsched run` and `accelsched
device-plugin`, with the chart's rule file loaded: every query of the chart's dashboard returns data, and the
recording rules produce their series.

The scheduler runs with leader election against the test API server and has work to show: a pod it binds, one it
cannot place (rejected by NodeResourcesFit), and a cordoned node whose free devices are stranded. The device plugin
runs from the fake source with one device made Unhealthy, on a socket folder of its own (no kubelet: it keeps
trying to register, and serves its metrics meanwhile).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import prereqs
import pytest
import yaml
from conftest import ACCELERATOR, KubeContext
from controlplane import REPO
from livekit import accel_pod, kube_for, node_of, wait_for

pytestmark = pytest.mark.integration

FILES = REPO / "charts" / "accelsched" / "files"


@pytest.fixture(scope="module")
def prometheus_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prereqs.built_binary("prometheus", "prometheus", tmp_path_factory.mktemp("prom") / "build.log")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def _dashboard_queries() -> list[tuple[str, str]]:
    doc = json.loads((FILES / "dashboard.json").read_text())
    # Grafana's $__rate_interval is at least four scrape intervals: 1 s scrapes here.
    return [(p["title"], t["expr"].replace("$__rate_interval", "20s")) for p in doc["panels"] for t in p["targets"]]


def test_every_dashboard_query_has_data_from_a_live_accelsched(
    kube: KubeContext, prometheus_bin: Path, tmp_path: Path
) -> None:
    ns = kube.namespace
    kube.make_node("prom-a", capacity={ACCELERATOR: 4})
    kube.make_node("prom-cordoned", capacity={ACCELERATOR: 4}, unschedulable=True)
    sched_port, plugin_port, prom_port = _free_port(), _free_port(), _free_port()
    lease = f"accelsched-{ns}"
    procs: list[subprocess.Popen[bytes]] = []
    socket_dir = ""
    try:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "accelsched.cli", "run", f"--kubeconfig={kube.kubeconfig}",
                 f"--metrics-port={sched_port}", "--metrics-address=127.0.0.1", "--leader-elect",
                 f"--leader-elect-resource-name={lease}", f"--leader-elect-resource-namespace={ns}"],
                stdout=subprocess.DEVNULL, stderr=(tmp_path / "run.log").open("wb"),
            )
        )  # fmt: skip
        socket_dir = tempfile.mkdtemp(prefix="dp-", dir="/tmp")  # a unix socket path holds at most 107 bytes
        plugin_config = tmp_path / "plugin.yaml"
        plugin_config.write_text(
            yaml.safe_dump(
                {
                    "resourceName": ACCELERATOR,
                    "source": "fake",
                    "socketDir": socket_dir,
                    "fake": {"devices": 4, "health": [{"afterSeconds": 0, "device": "ai-accelerator-1",
                                                       "health": "Unhealthy"}]},
                    "metrics": {"address": "127.0.0.1", "port": plugin_port},
                }
            )
        )  # fmt: skip
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "accelsched.cli", "device-plugin", "--config", str(plugin_config)],
                stdout=subprocess.DEVNULL, stderr=(tmp_path / "plugin.log").open("wb"),
            )
        )  # fmt: skip
        kube.core.create_namespaced_pod(ns, accel_pod("fits", ns, 2))
        kube.core.create_namespaced_pod(ns, accel_pod("too-big", ns, 8))
        api = kube_for(kube.kubeconfig)
        wait_for("fits bound", lambda: node_of(api, ns, "fits") == "prom-a", timeout=60)

        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(FILES / "prometheus-rules.yaml")],
            "scrape_configs": [
                {"job_name": "accelsched", "static_configs": [{"targets": [f"127.0.0.1:{sched_port}"]}]},
                {"job_name": "device-plugin", "static_configs": [{"targets": [f"127.0.0.1:{plugin_port}"]}]},
            ],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        procs.append(
            subprocess.Popen(
                [str(prometheus_bin), f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"),
            )
        )  # fmt: skip

        def targets_up() -> bool:
            try:
                up = _query(prom_port, "up")
            except OSError:
                return False
            return len(up) == 2 and all(s["value"][1] == "1" for s in up)

        wait_for("both targets scraped", targets_up, timeout=60)
        time.sleep(6)  # a few scrapes, so that rates over 20 s have two points or more

        empty = [title for title, expr in _dashboard_queries() if not _query(prom_port, expr)]
        assert empty == [], f"dashboard panels without data: {empty}"

        def value(expr: str) -> dict[str, float]:
            return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in _query(prom_port, expr)}

        assert value('accelsched:unschedulable_pods:sum_by_plugin{plugin="NodeResourcesFit"}')
        assert list(value(f'accelsched:accelerators_stranded:ratio{{resource="{ACCELERATOR}"}}').values()) == [0.5]
        assert list(value(f'leader_election_master_status{{name="{lease}"}}').values()) == [1.0]
        unhealthy = value('sum(accelsched_device_plugin_devices{health="Unhealthy"})')
        assert list(unhealthy.values()) == [1.0]
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
