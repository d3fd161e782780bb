"""Keep this node's ResourceSlices in the API server equal to the inventory, as the kubelet plugin helper's
resourceslice controller does for real drivers.

Every sync lists the slices of this driver on this node (field selectors ``spec.nodeName`` and ``spec.driver``)
and makes them the wanted ones: missing slices are created, changed ones updated, others deleted (stale slices of
an earlier run are gone after the first sync). When the devices change (one disappears or comes back) the pool's
generation goes up, so the scheduler only counts the newest slices while an update is half done; the first
generation of a run is past every generation already in the API. Slices the kubelet wiped (it deletes a node's
slices at its start and when a driver stays unregistered) are recreated by the next sync.

Each slice is owned by the Node (ownerReferences, controller), so it is garbage-collected with the Node.
"""

from __future__ import annotations

import logging
from typing import Any

from accelsched.dra.inventory import NodeInventory, resource_slices
from accelsched.live import kube as k

log = logging.getLogger(__name__)

RESOURCE_SLICES = k.Resource("/apis/resource.k8s.io/v1", "resourceslices", namespaced=False)


class SlicePublisher:
    def __init__(self, kube: Any, driver: str, node_name: str) -> None:
        self.kube = kube
        self.driver = driver
        self.node_name = node_name
        self.generation = 0  # 0: not synced yet in this run
        self._owner: dict[str, str] | None = None
        self._content: list[Any] | None = None  # the specs (sans generation) the current generation stands for

    def _selector(self) -> str:
        return f"spec.nodeName={self.node_name},spec.driver={self.driver}"

    def existing(self) -> dict[str, dict[str, Any]]:
        items = self.kube.list(RESOURCE_SLICES, field_selector=self._selector()).get("items") or []
        return {s["metadata"]["name"]: s for s in items}

    def owner(self) -> dict[str, str]:
        if self._owner is None:
            node = self.kube.get(k.NODES, self.node_name)
            self._owner = {"name": self.node_name, "uid": node["metadata"]["uid"]}
        return self._owner

    def sync(self, inventory: NodeInventory) -> bool:
        """One reconcile pass; False (and a warning) when the API refused or was unreachable: the next pass retries."""
        try:
            self._sync(inventory)
        except k.ApiError as exc:
            log.warning("publishing ResourceSlices of node %s: %s", self.node_name, exc)
            return False
        return True

    def _sync(self, inventory: NodeInventory) -> None:
        current = self.existing()
        owner = self.owner()
        unversioned = resource_slices(inventory, self.driver, self.node_name, 0, owner)
        content = [s["spec"] | {"pool": None} for s in unversioned]
        if self.generation == 0:
            seen = [int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0) for s in current.values()]
            self.generation = max(seen, default=0) + 1
            self._content = content
        elif content != self._content:
            self.generation += 1
            self._content = content
            log.info("node %s: devices changed, pool generation %d", self.node_name, self.generation)
        wanted = resource_slices(inventory, self.driver, self.node_name, self.generation, owner)
        for want in wanted:
            name = want["metadata"]["name"]
            have = current.pop(name, None)
            if have is None:
                self.kube.create(RESOURCE_SLICES, want)
                log.info("created ResourceSlice %s (generation %d)", name, self.generation)
            elif not _same(have, want):
                body = {
                    **want,
                    "metadata": {**want["metadata"], "resourceVersion": have["metadata"]["resourceVersion"]},
                }
                self.kube.replace(RESOURCE_SLICES, name, body)
                log.info("updated ResourceSlice %s (generation %d)", name, self.generation)
        for name in current:  # stale: an earlier run's, or a slice the pool no longer needs
            try:
                self.kube.delete(RESOURCE_SLICES, name)
                log.info("deleted stale ResourceSlice %s", name)
            except k.ApiError as exc:
                if exc.status != 404:
                    raise

    def delete_all(self) -> None:
        """Remove every slice of this driver on this node (the driver is going away for good)."""
        for name in self.existing():
            try:
                self.kube.delete(RESOURCE_SLICES, name)
            except k.ApiError as exc:
                if exc.status != 404:
                    raise


def _same(have: dict[str, Any], want: dict[str, Any]) -> bool:
    """The slice in the API says what we want: the same spec and owner (fields the server adds are ignored)."""
    spec = have.get("spec") or {}
    if any(spec.get(key) != value for key, value in want["spec"].items()):
        return False
    return (have["metadata"].get("ownerReferences") or []) == want["metadata"]["ownerReferences"]
