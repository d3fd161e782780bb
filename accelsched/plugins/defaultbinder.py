"""DefaultBinder: binds the pod to the node through the mode's binder (in-memory, or pods/binding in live mode)."""

from __future__ import annotations

from collections.abc import Callable

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import SUCCESS, Code, CycleState, Status

NAME = "DefaultBinder"

# A binder writes the decision somewhere: returns an error message, or None on success.
Binder = Callable[[Pod, str], "str | None"]


def bind_in_memory(pod: Pod, node: str) -> str | None:
    """Offline modes: the binding is the pod's spec.nodeName, as the API server would record it."""
    pod.node_name = node
    pod.raw.setdefault("spec", {})["nodeName"] = node
    return None


class DefaultBinder:
    name = NAME

    def __init__(self, binder: Binder = bind_in_memory) -> None:
        self.binder = binder

    def bind(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status:
        error = self.binder(pod, cluster.nodes[node].name)
        if error:
            return Status(Code.ERROR, (error,), NAME)
        return SUCCESS


def new(args: dict, handle: object) -> DefaultBinder:
    binder = getattr(handle, "binder", None) or bind_in_memory
    return DefaultBinder(binder)
