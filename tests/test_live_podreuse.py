"""live.podreuse: a Pending pod tried again is a copy of its signature's first parsed pod, equal to what parsing it
would give (but the service account token volume's random name), and parsed again once what the parser reads of
it changed."""

from __future__ import annotations

import copy
import dataclasses

from accelsched.live import convert as live_convert
from accelsched.live.podreuse import ParsedPods


def pending(name: str, cpu: str = "2", gpus: str = "9") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "schedulerName": "accelsched",
            "nodeSelector": {"pool": "training"},
            "containers": [{"name": "main", "image": "img", "resources": {"requests": {"cpu": cpu, "gpu": gpus}}}],
            "volumes": [{"name": f"kube-api-access-{name}", "projected": {"sources": []}}],
        },
        "status": {"phase": "Pending"},
    }


def fields(pod) -> dict:
    out = {f.name: getattr(pod, f.name) for f in dataclasses.fields(pod) if f.name not in ("volumes", "raw")}
    out["volumes"] = [(v.kind, v.read_only) for v in pod.volumes]
    return out


def test_an_equivalent_pod_is_copied_and_equals_its_own_parse() -> None:
    parsed = ParsedPods()
    first, signed = parsed.parse(pending("a"))
    assert signed is not None and parsed.copied == 0
    obj = pending("b")
    parsed.parse(obj)  # its uid not seen yet: parsed
    again, signed_b = parsed.parse(obj)
    assert parsed.copied == 1 and signed_b == signed
    assert fields(again) == fields(live_convert.parse_pod(obj, live_convert.SOURCE))
    assert again.raw is obj and again.key == "ns/b"
    again.node_selector["zone"] = "x"  # a queue's admission adds to it; a cycle writes devices
    again.devices["gpu"] = ["0"]
    assert parsed.parse(obj)[0].node_selector == {"pool": "training"} and first.devices == {}


def test_a_report_does_not_parse_the_pod_again_but_a_changed_spec_does() -> None:
    parsed = ParsedPods()
    obj = pending("a")
    parsed.parse(obj)
    reported = copy.deepcopy(obj)
    reported["metadata"]["resourceVersion"] = "2"
    reported["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes"}]
    parsed.parse(reported)
    assert parsed.copied == 1
    resized = copy.deepcopy(reported)
    resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    pod, _ = parsed.parse(resized)
    assert parsed.copied == 1 and pod.requests["cpu"] == 3000
    parsed.forget("uid-a")
    parsed.parse(resized)
    assert parsed.copied == 1  # forgotten (bound or deleted): parsed in full
