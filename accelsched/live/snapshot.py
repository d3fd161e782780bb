"""What a live reader lists: one table of every resource the scheduler reads, and one snapshot built from it.

``accelsched run``'s informers, the web view's informers (ui/live.py), the kubectl plugin and ``schedule`` /
``explain --from-cluster`` (live/whatif.py) all read the cluster through this table, so a one-shot what-if sees
exactly the objects a running scheduler would (DRA, storage, upstream Workload PodGroups, Kueue's objects), not a
subset of its own.
"""

from __future__ import annotations

from accelsched.framework import gang
from accelsched.live import convert as live_convert
from accelsched.live import dra as live_dra
from accelsched.live import kube as k
from accelsched.live import kueue as live_kueue
from accelsched.live import volumes as live_volumes
from accelsched.live.kube import JSON, ApiError, Kube

NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"  # as live/scheduler.py lists pods


def resources() -> list[tuple[str, k.Resource, bool, dict[str, str]]]:
    """(name, resource, optional, query) of every informer: exactly what live/scheduler.py reads. An optional one
    is a CRD that may not be installed (its 404 is an empty list)."""
    out: list[tuple[str, k.Resource, bool, dict[str, str]]] = [
        ("nodes", k.NODES, False, {}),
        ("pods", k.PODS, False, {"field_selector": NON_TERMINAL}),
        ("namespaces", k.NAMESPACES, False, {}),
        ("podgroups", k.POD_GROUPS, True, {}),
        ("workload_podgroups", k.WORKLOAD_POD_GROUPS, True, {}),
        ("noderesourcetopologies", k.NODE_RESOURCE_TOPOLOGIES, True, {}),
    ]
    out += [(kind, resource, False, {}) for kind, resource in live_volumes.RESOURCES.items()]
    out += [(kind, resource, True, {}) for kind, resource in live_dra.RESOURCES.items()]
    out += [(kind, resource, True, {}) for kind, resource in live_kueue.RESOURCES.items()]
    return out


def snapshot_of(stores: dict[str, list[JSON]]) -> live_convert.Snapshot:
    """A Snapshot of the objects of each of ``resources()`` (by its name)."""
    workload = [{**o, "apiVersion": gang.WORKLOAD_API} for o in stores["workload_podgroups"]]
    return live_convert.Snapshot(
        nodes=stores["nodes"],
        pods=stores["pods"],
        namespaces=stores["namespaces"],
        pod_groups=stores["podgroups"] + workload,
        topologies=stores["noderesourcetopologies"],
        storage={kind: stores[kind] for kind in live_volumes.RESOURCES},
        dra={kind: stores[kind] for kind in live_dra.RESOURCES},
        kueue={kind: stores[kind] for kind in live_kueue.RESOURCES},
    )


def list_snapshot(kube: Kube) -> live_convert.Snapshot:
    """Everything the informers would watch, listed once. A resource the server does not serve (a CRD not
    installed) is empty, as for the informers."""
    stores: dict[str, list[JSON]] = {}
    for name, resource, optional, query in resources():
        # A 429 (a watch cache re-initializing after a CRD appeared) is retried inside Kube.request, as client-go.
        try:
            stores[name] = kube.list(resource, **query).get("items") or []
        except ApiError as exc:
            if not (optional and exc.status == 404):
                raise
            stores[name] = []
    return snapshot_of(stores)
