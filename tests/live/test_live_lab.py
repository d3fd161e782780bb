"""The lab scenario through a real API server: the same placements, device IDs and FailedScheduling messages
as offline ``accelsched schedule`` on the same YAML, written back the way kube-scheduler writes them
(pods/binding, Scheduled / FailedScheduling events, the PodScheduled condition); and the read-only what-if
commands on the live cluster agree."""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import KubeContext
from livekit import (
    LAB,
    apply_nodes,
    condition_message,
    decided,
    devices_of,
    docs,
    events_for,
    for_accelsched,
    kube_for,
    running_scheduler,
    wait_for,
)

from accelsched import report
from accelsched.cli import main
from accelsched.engine import schedule
from accelsched.live import kube as k

FILES = [LAB / "00-nodes.yaml", LAB / "02-train-16.yaml", LAB / "03-maintenance.yaml", LAB / "06-fill.yaml"]


def test_lab_binds_through_the_api_exactly_as_offline_schedule(kube: KubeContext) -> None:
    _, offline_results = schedule(FILES)
    offline = {r.pod.name: report.pod_json(r) for r in offline_results}
    assert {n for n, r in offline.items() if r["node"]} and {n for n, r in offline.items() if not r["node"]}

    apply_nodes(kube.api, FILES[0])
    api = kube_for(kube.kubeconfig)
    with running_scheduler(kube.kubeconfig) as scheduler:
        # One at a time, in file order: the offline queue's order (equal priority, then arrival).
        for path in FILES[1:]:
            for pod in docs(path, "Pod"):
                api.create(k.PODS, for_accelsched(pod, kube.namespace), kube.namespace)
                name = pod["metadata"]["name"]
                wait_for(f"a decision on {name}", lambda name=name: decided(api, kube.namespace, name))
        live = {name: decided(api, kube.namespace, name) for name in offline}
        expected_bound = sum(1 for r in offline.values() if r["node"])
        wait_for("the binds counted", lambda: scheduler.bound_total == expected_bound, timeout=10)

    for name, expected in offline.items():
        pod = live[name]
        assert pod is not None
        node = pod["spec"].get("nodeName")
        assert node == expected["node"], name
        if node:
            assert devices_of(pod) == expected["devices"], name
            (event,) = events_for(api, kube.namespace, name, "Scheduled")
            assert event["note"] == f"Successfully assigned {kube.namespace}/{name} to {node}"
            assert event["reportingController"] == "accelsched" and event["type"] == "Normal"
            assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"])
        else:
            assert condition_message(pod) == expected["message"], name
            failed = events_for(api, kube.namespace, name, "FailedScheduling")
            assert failed and {e["note"] for e in failed} == {expected["message"]}
            assert failed[0]["type"] == "Warning"

    # The what-if commands read the same cluster and say the same (no pod is bound by them).
    runner = CliRunner()
    out = runner.invoke(main, ["schedule", "--kubeconfig", str(kube.kubeconfig), "-o", "json"])
    assert out.exit_code == 0, out.output
    whatif = {p["name"]: p for p in json.loads(out.stdout)["pods"] if p["namespace"] == kube.namespace}
    pending = {n for n, r in offline.items() if not r["node"]}
    assert set(whatif) == pending
    assert {n: p["message"] for n, p in whatif.items()} == {n: offline[n]["message"] for n in pending}
    out = runner.invoke(main, ["explain", f"{kube.namespace}/infer-b", "--kubeconfig", str(kube.kubeconfig)])
    assert out.exit_code == 0, out.output
    assert offline["infer-b"]["message"] in out.stdout.replace("\n", "")
    assert not decided(api, kube.namespace, "infer-b")["spec"].get("nodeName")
