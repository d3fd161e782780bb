"""accelsched_accelerators{resource, state}: the cluster's accelerators by state, computed when Prometheus scrapes.

kube-scheduler has no such series; accelerator clusters need it for capacity alerts (charts/accelsched/files/
prometheus-rules.yaml: stranded devices). States per device resource (an extended resource some node advertises):
``allocatable``, ``used`` (requested by the pods the scheduler accounts), ``free``, and ``stranded``: free on a node no
new pod asking for it can land on (cordoned, a NoSchedule/NoExecute taint that no pod asking for that resource
tolerates, no pod slot, cpu or memory left), as the web view's capacity panel counts them (ui/capacity.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from accelsched.ui import capacity

NAME = "accelsched_accelerators"
HELP = "Accelerators by extended resource name and state: allocatable, used, free, and stranded (free but unusable)."
STATES = ("allocatable", "used", "free", "stranded")
RETRIES = 5  # the loop may change the state under the read: read again, as /debug/state does


def accelerator_states(cluster: Any) -> dict[str, dict[str, int]]:
    """Per device resource, the count in each of STATES (O(nodes + bound pods), numpy over nodes)."""
    resources = capacity.device_resources(cluster)
    tolerated = capacity.tolerated_taints(cluster, [], resources)
    out: dict[str, dict[str, int]] = {}
    masks: dict[frozenset, np.ndarray] = {}
    for res in resources:
        r = cluster.res_index[res]
        allocatable = cluster.allocatable[r]
        used = np.minimum(cluster.requested[r], allocatable)
        free = allocatable - used
        key = tolerated[res]
        if key not in masks:
            masks[key] = capacity.blocked(cluster, key)[0]
        out[res] = {
            "allocatable": int(allocatable.sum()),
            "used": int(used.sum()),
            "free": int(free.sum()),
            "stranded": int(free[masks[key]].sum()),
        }
    return out


class AcceleratorCollector(Collector):
    """Reads ``cluster()`` (the scheduler's current ClusterState, or None before the first sync) at each scrape."""

    def __init__(self, cluster: Callable[[], Any]) -> None:
        self.cluster = cluster

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter([GaugeMetricFamily(NAME, HELP, labels=["resource", "state"])])  # no scrape at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(NAME, HELP, labels=["resource", "state"])
        cluster = self.cluster()
        states: dict[str, dict[str, int]] = {}
        for attempt in range(RETRIES if cluster is not None else 0):
            try:
                states = accelerator_states(cluster)
                break
            except (RuntimeError, IndexError, ValueError):  # a dict or array changed under the read
                if attempt < RETRIES - 1:
                    time.sleep(0.01)
        for res, counts in states.items():
            for state in STATES:
                family.add_metric([res, state], counts[state])
        yield family
