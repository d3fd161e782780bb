"""NodePorts as kube-scheduler v1.36.3: hostPort/hostIP/protocol conflicts with bound, assumed and just-placed pods.

The conflict table is node_ports_test.go's TestNodePorts, case by case. Expected messages are written from the
v1.36.3 source (nodeports.ErrReason, Unschedulable; FitError.Error) until the HARNESS records them from the real
kube-scheduler.
"""

from __future__ import annotations

import numpy as np
import pytest
from builders import config, container, filter_message, node, pod, reason_counts, run, session

from accelsched.api.objects import HostPort, parse_pod
from accelsched.errors import InputError
from accelsched.explain import Explainer
from accelsched.framework.interface import CycleState
from accelsched.plugins import nodeports

REASON = "node(s) didn't have free ports for the requested pod ports"


def port(spec: str) -> dict:
    """``"TCP/127.0.0.1/8080"`` (node_ports_test.go's newPod notation) as a container port; empty parts omitted."""
    protocol, ip, number = spec.split("/")
    out: dict = {"containerPort": int(number), "hostPort": int(number)}
    if protocol:
        out["protocol"] = protocol
    if ip:
        out["hostIP"] = ip
    return out


def ported(name: str, *specs: str, on: str | None = None, priority: int | None = None, cpu: str = "100m") -> dict:
    doc = pod(name, cpu, node_name=on, priority=priority)
    doc["spec"]["containers"][0]["ports"] = [port(s) for s in specs]
    return doc


# TestNodePorts: (the pod's ports, the ports of the pod on the node, conflict?)
GO_CASES = [
    (("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/9090",), False),  # other port
    (("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), True),  # same udp port
    (("TCP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), True),  # same tcp port
    (("TCP/127.0.0.1/8080",), ("TCP/127.0.0.2/8080",), False),  # different host ip
    (("UDP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), False),  # different protocol
    (("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), True),  # second udp port conflict
    (("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"), ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"), True),
    (("TCP/0.0.0.0/8001",), ("TCP/127.0.0.1/8001",), True),  # conflict due to 0.0.0.0 hostIP
    (("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ("TCP/127.0.0.1/8001",), True),
    (("TCP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), True),  # second tcp port conflict to 0.0.0.0 hostIP
    (("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), False),  # second different protocol
    (("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), True),
    # Defaults: an empty hostIP binds every address, an empty protocol is TCP.
    (("//8001",), ("TCP/127.0.0.1/8001",), True),
    (("TCP/127.0.0.1/8001",), ("//8001",), True),
    (("UDP//8001",), ("//8001",), False),
    (("SCTP/10.0.0.1/8001",), ("SCTP/10.0.0.2/8001",), False),
]


@pytest.mark.parametrize(("wanted", "held", "conflict"), GO_CASES)
def test_conflicts_follow_kube_schedulers_host_port_table(wanted, held, conflict) -> None:
    s = session([node("a")], [ported("holder", *held, on="a"), ported("m1", *wanted)])
    (result,) = s.schedule()
    if conflict:
        assert result.node is None
        assert result.reasons == {"a": [REASON]}
        assert filter_message(result) == f"0/1 nodes are available: 1 {REASON}."
    else:
        assert result.node == "a", result.message


def test_the_vectorized_check_agrees_with_the_pairwise_rule_on_every_node() -> None:
    """ClusterState.port_conflicts (masks over nodes) against CheckConflict pair by pair, on many mixed nodes."""
    rng = np.random.default_rng(7)
    ips, protocols, numbers = ["", "0.0.0.0", "10.0.0.1", "10.0.0.2"], ["TCP", "UDP", ""], [80, 81]
    nodes = [node(f"n{i}") for i in range(40)]
    bound = []
    for i in range(40):
        for j in range(int(rng.integers(0, 3))):
            spec = f"{rng.choice(protocols)}/{rng.choice(ips)}/{rng.choice(numbers)}"
            bound.append(ported(f"p{i}-{j}", spec, on=f"n{i}"))
    s = session(nodes, bound)
    cluster = s.cluster
    for protocol in protocols:
        for ip in ips:
            for number in numbers:
                wanted = parse_pod(ported("w", f"{protocol}/{ip}/{number}")).host_ports
                expected = [
                    any(nodeports.conflicts(w, u) for w in wanted for u in cluster.used_ports(i))
                    for i in range(cluster.n)
                ]
                assert cluster.port_conflicts(wanted).tolist() == expected


def test_pods_placed_in_the_same_run_hold_their_ports() -> None:
    results = run([node("a"), node("b")], [ported(f"web-{i}", "TCP//8080") for i in range(3)])
    assert sorted(r.node for r in results.values() if r.node) == ["a", "b"]
    (pending,) = [r for r in results.values() if r.node is None]
    assert pending.reasons == {"a": [REASON], "b": [REASON]}
    assert reason_counts(pending) == {REASON: 2}


def test_sidecar_init_containers_hold_ports_and_regular_init_containers_do_not() -> None:
    """util.GetHostPorts: restartPolicy Always init containers run all along; the others have exited."""
    sidecar = container("proxy", restart_policy="Always", requests={"cpu": "10m"})
    sidecar["ports"] = [port("TCP//9000")]
    one_shot = container("setup", requests={"cpu": "10m"})
    one_shot["ports"] = [port("TCP//9001")]
    holder = pod("holder", node_name="a", init_containers=[sidecar, one_shot])
    assert parse_pod(holder).host_ports == (HostPort("0.0.0.0", "TCP", 9000),)
    results = run([node("a")], [holder, ported("wants-9000", "TCP//9000"), ported("wants-9001", "TCP//9001")])
    assert results["wants-9000"].node is None
    assert results["wants-9001"].node == "a"


def test_host_network_pods_hold_their_container_ports() -> None:
    """API defaulting (defaultHostNetworkPorts): under hostNetwork an unset hostPort is the containerPort."""
    holder = pod("holder", node_name="a")
    holder["spec"]["hostNetwork"] = True
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert parse_pod(holder).host_ports == (HostPort("0.0.0.0", "TCP", 8080),)
    results = run([node("a"), node("b")], [holder, ported("web", "TCP//8080")])
    assert results["web"].node == "b"


def test_a_pod_without_host_ports_skips_the_filter() -> None:
    """PreFilter returns Skip: the filter never runs for the common pod, so it costs nothing."""
    s = session([node("a")], [ported("holder", "TCP//80", on="a")])
    state = CycleState()
    plain = parse_pod(pod("plain"))
    plugin = nodeports.new({}, None)
    assert plugin.pre_filter(state, plain, s.cluster).code.value == "Skip"
    assert plugin.filter(state, plain, s.cluster).rejections == []
    assert plugin.pod_independent(plain, s.cluster)
    assert not plugin.pod_independent(parse_pod(ported("w", "TCP//80")), s.cluster)


def test_the_rejection_is_resolvable_and_preemption_frees_the_port() -> None:
    """Unschedulable, not unresolvable: evicting the lower-priority holder frees the port in the dry run."""
    nodes = [node("a")]
    results = run(nodes, [ported("low", "TCP//8080", on="a", priority=1), ported("high", "TCP//8080", priority=100)])
    assert results["high"].node == "a"
    assert [v.name for v in results["high"].preempted] == ["low"]
    assert results["low"].message == "Preempted by default/high on node a"


def test_only_the_pod_holding_the_port_is_evicted() -> None:
    nodes = [node("a", cpu="2")]
    existing = [ported("port-holder", "TCP//8080", on="a", priority=1), pod("other", "1", node_name="a", priority=1)]
    results = run(nodes, [*existing, ported("high", "TCP//8080", priority=100)])
    assert results["high"].node == "a"
    assert [v.name for v in results["high"].preempted] == ["port-holder"]


def test_a_port_held_by_a_more_important_pod_is_the_dry_runs_reason() -> None:
    """SelectVictimsOnNode removes the lower-priority pods and runs the filters: NodePorts (before Fit) fails first
    on the port the higher-priority pod keeps, though Fit would also be short."""
    nodes = [node("a", cpu="2")]
    existing = [ported("keeper", "TCP//8080", on="a", priority=500), pod("low", "1", node_name="a", priority=1)]
    results = run(nodes, [*existing, ported("high", "TCP//8080", priority=100, cpu="2")])
    high = results["high"]
    assert high.node is None
    assert high.message.endswith(f"preemption: 0/1 nodes are available: 1 {REASON}.")


def test_a_freed_port_is_free_again_and_evicted_pods_restore_it() -> None:
    s = session([node("a")], [ported("holder", "TCP//8080", on="a")])
    cluster = s.cluster
    holder = cluster.pods_on[0]["default/holder"]
    wanted = parse_pod(ported("w", "TCP//8080")).host_ports
    assert cluster.port_conflicts(wanted).tolist() == [True]
    at = s.scheduler.evict(holder)
    assert cluster.port_conflicts(wanted).tolist() == [False]
    s.scheduler.restore(holder, at)
    assert cluster.port_conflicts(wanted).tolist() == [True]


def test_explain_names_the_port_and_the_pod_holding_it() -> None:
    s = session([node("a")], [ported("holder", "TCP//8080", on="a"), ported("web", "TCP/10.0.0.1/8080")])
    explainer = Explainer(s.scheduler, {"default/web"})
    s.schedule()
    (verdict,) = explainer.verdicts["default/web"]
    assert verdict.failing == ["NodePorts"]
    assert verdict.details == ["host port 10.0.0.1:8080/TCP is taken on a (0.0.0.0:8080/TCP by default/holder)"]
    assert verdict.remedies == ["evicting or moving default/holder would make a feasible"]


def test_nodeports_can_be_disabled() -> None:
    cfg = config(plugins={"multiPoint": {"disabled": [{"name": "NodePorts"}]}})
    results = run([node("a")], [ported("holder", "TCP//8080", on="a"), ported("web", "TCP//8080")], config=cfg)
    assert results["web"].node == "a"


@pytest.mark.parametrize(
    ("ports", "field", "words"),
    [
        ([port("TCP//80"), port("TCP//80")], "spec.containers[0].ports[1].hostPort", 'Duplicate value: "TCP//80"'),
        ([{"containerPort": 80, "hostPort": 70000}], "spec.containers[0].ports[0].hostPort", "between 1 and 65535"),
        ([{"containerPort": 80, "protocol": "HTTP"}], "spec.containers[0].ports[0].protocol", "unknown value 'HTTP'"),
        ([{"hostPort": 80}], "spec.containers[0].ports[0].containerPort", "is required"),
    ],
)
def test_ports_the_api_server_refuses_are_bad_input(ports, field, words) -> None:
    doc = pod("bad")
    doc["spec"]["containers"][0]["ports"] = ports
    with pytest.raises(InputError) as err:
        parse_pod(doc, "pods.yaml")
    assert err.value.field == field
    assert words in err.value.message
    assert err.value.source == "pods.yaml"


def test_the_same_port_in_two_containers_is_refused_but_not_in_a_sidecar_and_a_container() -> None:
    """checkHostPortConflicts runs over all app containers together and over each init container alone."""
    doc = pod("two", containers=[container("a"), container("b")])
    for c in doc["spec"]["containers"]:
        c["ports"] = [port("TCP//8080")]
    with pytest.raises(InputError):
        parse_pod(doc)
    sidecar = container("s", restart_policy="Always")
    sidecar["ports"] = [port("TCP//8080")]
    ok = pod("ok", init_containers=[sidecar])
    ok["spec"]["containers"][0]["ports"] = [port("TCP//8080")]
    assert parse_pod(ok).host_ports == (HostPort("0.0.0.0", "TCP", 8080),) * 2
