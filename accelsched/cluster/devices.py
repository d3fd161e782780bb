"""Device inventory: the concrete device IDs behind each extended resource of a node, and which are free.

A binding allocates IDs, not counts (design principle 2), so the device plugin's Allocate, topology and
fragmentation all see the same truth. The choice of IDs is a policy: ``first_free`` keeps the lowest IDs;
topology-aware allocators replace it without changing this ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelsched.api import quantity

# Picks ``count`` device indices among the free ones (indices into DevicePool.ids).
Allocator = Callable[["DevicePool", int], list[int]]


def default_device_ids(resource: str, count: int) -> list[str]:
    """IDs for a node that does not name its devices: ``<resource basename>-<i>``, as a device plugin would."""
    base = resource.rsplit("/", 1)[-1]
    return [f"{base}-{i}" for i in range(count)]


@dataclass
class DevicePool:
    """The devices of one extended resource on one node."""

    resource: str
    ids: list[str]
    free: np.ndarray = field(init=False)
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.free = np.ones(len(self.ids), dtype=bool)
        self.index = {d: i for i, d in enumerate(self.ids)}

    @property
    def free_count(self) -> int:
        return int(self.free.sum())

    def free_ids(self) -> list[str]:
        return [self.ids[i] for i in np.flatnonzero(self.free)]

    def take(self, indices: Sequence[int]) -> list[str]:
        if not all(self.free[i] for i in indices):
            raise ValueError(f"{self.resource}: device already allocated")
        self.free[list(indices)] = False
        return [self.ids[i] for i in indices]

    def take_ids(self, ids: Sequence[str]) -> list[str]:
        missing = [d for d in ids if d not in self.index]
        if missing:
            raise ValueError(f"{self.resource}: unknown device(s) {', '.join(missing)}")
        return self.take([self.index[d] for d in ids])

    def release(self, ids: Sequence[str]) -> None:
        for d in ids:
            self.free[self.index[d]] = True


def first_free(pool: DevicePool, count: int) -> list[int]:
    """The lowest free device indices: deterministic and simple; topology-aware allocators do better."""
    return [int(i) for i in np.flatnonzero(pool.free)[:count]]


def is_device_resource(name: str) -> bool:
    """Extended resources are devices a plugin advertises; hugepages and core resources are not."""
    return quantity.is_extended(name)


@dataclass
class NodeDevices:
    """All device pools of one node, and its partition ledger where its devices are split (MIG, slices...)."""

    pools: dict[str, DevicePool] = field(default_factory=dict)
    partition: Any = None  # devices.partition.Partition: serves the resources it manages instead of pools

    @classmethod
    def for_node(cls, allocatable: dict[str, int], named: dict[str, list[str]], partition: Any = None) -> NodeDevices:
        pools = {}
        for res, count in allocatable.items():
            if partition is not None and partition.manages(res):
                continue
            if is_device_resource(res):
                ids = named.get(res) or default_device_ids(res, count)
                # The node advertises ``count`` healthy devices; a named list may hold more (unhealthy ones).
                pools[res] = DevicePool(res, list(ids[:count]))
        return cls(pools, partition)

    def copy(self) -> NodeDevices:
        """A ledger that changes apart from this one (the ids and their index are never changed: shared)."""
        pools = {}
        for res, pool in self.pools.items():
            twin = object.__new__(DevicePool)
            twin.resource, twin.ids, twin.index, twin.free = pool.resource, pool.ids, pool.index, pool.free.copy()
            pools[res] = twin
        return NodeDevices(pools, self.partition.copy() if self.partition is not None else None)

    def partitioned(self, requests: dict[str, int]) -> dict[str, int]:
        """The part of ``requests`` the partition ledger serves."""
        if self.partition is None:
            return {}
        return {r: a for r, a in requests.items() if a and self.partition.manages(r)}

    def allocate(
        self,
        requests: dict[str, int],
        allocator: Allocator = first_free,
        owner: str = "",
        policy: str | int = "binpack",
    ) -> dict[str, list[str]]:
        """Allocate devices for every device resource in ``requests``; all or nothing. ``policy`` (binpack or
        spread) picks the device for what the partition ledger serves."""
        split = self.partitioned(requests)
        chosen: dict[str, list[str]] = self.partition.allocate(split, policy, owner) if split else {}
        try:
            for res, count in requests.items():
                if not is_device_resource(res) or count == 0 or res in split:
                    continue
                pool = self.pools.get(res)
                if pool is None or pool.free_count < count:
                    raise ValueError(f"not enough free {res}")
                picked = allocator(pool, count)
                if len(picked) != count:
                    raise ValueError(f"allocator returned {len(picked)} devices of {res}, wanted {count}")
                chosen[res] = pool.take(picked)
        except ValueError:
            self.release(chosen)
            raise
        return chosen

    def claim(self, devices: dict[str, list[str]], owner: str = "") -> None:
        """Mark devices a pod already holds (from its annotation) as used; all or nothing."""
        done: dict[str, list[str]] = {}
        split = {r: ids for r, ids in devices.items() if self.partition is not None and self.partition.manages(r)}
        if split:
            self.partition.claim(split, owner)  # all or nothing itself
        try:
            for res, ids in devices.items():
                if res in split:
                    continue
                pool = self.pools.get(res)
                if pool is None:
                    raise ValueError(f"node has no {res}")
                done[res] = pool.take_ids(ids)
        except ValueError:
            self.release({**done, **split})
            raise

    def release(self, devices: dict[str, list[str]]) -> None:
        if self.partition is not None:
            self.partition.release(devices)
        for res, ids in devices.items():
            if res in self.pools:
                self.pools[res].release(ids)
