"""accelsched_accelerators{resource, state} (live/devicemetrics.py): allocatable, used, free and stranded counts
as the web view's capacity panel counts them, rendered in Prometheus' text format."""

from __future__ import annotations

from builders import node, pod, start, taint, tol
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accelsched.live.devicemetrics import AcceleratorCollector, accelerator_states

GPU = "nvidia.com/gpu"


def test_states_count_stranded_devices_on_cordoned_tainted_and_full_nodes() -> None:
    session = start(
        node("a", **{GPU: 4}),
        node("cordoned", unschedulable=True, **{GPU: 4}),
        node("tainted", taints=[taint("maintenance")], **{GPU: 4}),
        node("no-slot", pods=1, **{GPU: 4}),
        pod("bound", node_name="a", extra={GPU: 3}),
        pod("filler", node_name="no-slot", extra={GPU: 1}),
    )
    states = accelerator_states(session.cluster)
    assert states == {GPU: {"allocatable": 16, "used": 4, "free": 12, "stranded": 11}}


def test_a_taint_that_a_pod_asking_for_the_resource_tolerates_strands_nothing() -> None:
    session = start(
        node("tainted", taints=[taint("gpu-only")], **{GPU: 8}),
        pod("tolerant", node_name="tainted", tolerations=[tol("gpu-only", "Exists")], extra={GPU: 2}),
    )
    assert accelerator_states(session.cluster)[GPU]["stranded"] == 0


def test_the_collector_renders_one_series_per_resource_and_state() -> None:
    session = start(node("a", **{GPU: 2, "example.com/fpga": 1}))
    registry = CollectorRegistry()
    registry.register(AcceleratorCollector(lambda: session.cluster))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    samples = {(s.labels["resource"], s.labels["state"]): s.value for s in families["accelsched_accelerators"].samples}
    assert samples[(GPU, "free")] == 2 and samples[("example.com/fpga", "allocatable")] == 1
    assert len(samples) == 8
    empty = CollectorRegistry()
    empty.register(AcceleratorCollector(lambda: None))  # before the first sync: the family, no series
    assert "accelsched_accelerators{" not in generate_latest(empty).decode()
