"""Read-only what-if on a live cluster: one list of everything, then the offline engine on that snapshot."""

from __future__ import annotations

from accelsched.engine import Session
from accelsched.framework.profile import SchedulerConfig
from accelsched.live import convert as live_convert
from accelsched.live import kube as k
from accelsched.live import kueue as live_kueue
from accelsched.live import volumes as live_volumes
from accelsched.live.kube import ApiError, Kube


def read_cluster(kube: Kube) -> live_convert.Snapshot:
    """Nodes, non-terminal pods, namespaces, the storage objects, and the PodGroups, NodeResourceTopologies and
    Kueue's objects (live/kueue.py) where served."""

    def items(resource: k.Resource, optional: bool = False, **query: str) -> list:
        try:
            return kube.list(resource, **query).get("items") or []
        except ApiError as exc:
            if optional and exc.status == 404:
                return []
            raise

    return live_convert.Snapshot(
        nodes=items(k.NODES),
        pods=items(k.PODS, field_selector="status.phase!=Succeeded,status.phase!=Failed"),
        namespaces=items(k.NAMESPACES),
        pod_groups=items(k.POD_GROUPS, optional=True),
        topologies=items(k.NODE_RESOURCE_TOPOLOGIES, optional=True),
        storage={kind: items(resource, optional=True) for kind, resource in live_volumes.RESOURCES.items()},
        kueue=live_kueue.list_objects(kube),
    )


def session_from_cluster(
    kube: Kube, config: SchedulerConfig | None = None, seed: int = 0
) -> tuple[Session, live_convert.Converted]:
    """A Session over the live snapshot with every pending pod (of any schedulerName) to try."""
    converted = live_convert.convert(read_cluster(kube))
    return live_convert.start_session(converted, config, seed), converted
