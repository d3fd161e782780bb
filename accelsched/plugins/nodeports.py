"""NodePorts: a pod asking for host ports fits only nodes where none of them is taken (kube-scheduler 1.36).

A port is taken when a pod bound or assumed on the node holds the same protocol and port on the same host IP, or
either side binds every address (hostIP empty or 0.0.0.0). Ports come from app containers and sidecar init
containers (util.GetHostPorts); the protocol defaults to TCP. The rejection is Unschedulable, not unresolvable:
evicting the pod holding the port frees it, so preemption may help, and its dry runs see the port freed because
ClusterState keeps the ports in use up to date on every assume and forget.
"""

from __future__ import annotations

from accelsched.api.objects import DEFAULT_BIND_ALL_HOST_IP, HostPort, Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import PASS, SKIP, SUCCESS, CycleState, FilterResult, NodeExplanation, Status

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


def conflicts(wanted: HostPort, used: HostPort) -> bool:
    """HostPortInfo.CheckConflict for one pair (ports already sanitized: empty IP is 0.0.0.0, protocol set)."""
    if (wanted.protocol, wanted.port) != (used.protocol, used.port):
        return False
    return DEFAULT_BIND_ALL_HOST_IP in (wanted.host_ip, used.host_ip) or wanted.host_ip == used.host_ip


def describe(port: HostPort) -> str:
    return f"{port.host_ip}:{port.port}/{port.protocol}"


class NodePorts:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        """Skip (leave Filter out) for a pod without host ports: the common case costs nothing."""
        return SUCCESS if pod.host_ports else SKIP

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        """Without host ports the verdict never depends on the pods on a node (DefaultPreemption's shortcut)."""
        return not pod.host_ports

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        if not pod.host_ports:
            return PASS
        result = FilterResult()
        result.reject(ERR_REASON, cluster.port_conflicts(pod.host_ports))
        return result

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        name = cluster.nodes[node].name
        details, remedies = [], []
        for wanted in pod.host_ports:
            for used in cluster.used_ports(node):
                if not conflicts(wanted, used):
                    continue
                holders = [p.key for p in cluster.pods_on[node].values() if used in p.host_ports]
                by = f" by {', '.join(holders)}" if holders else ""
                details.append(f"host port {describe(wanted)} is taken on {name} ({describe(used)}{by})")
                remedies.extend(r for r in (f"evicting or moving {key}" for key in holders) if r not in remedies)
        return NodeExplanation(details, remedies)


def new(args: dict, handle: object) -> NodePorts:
    return NodePorts()
