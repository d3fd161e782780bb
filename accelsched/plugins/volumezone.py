"""VolumeZone: a bound PV's zone and region labels must match the node's (kube-scheduler 1.36's VolumeZone).

PreFilter collects, for each persistentVolumeClaim of the pod, its PV's topology labels (failure-domain beta and
topology.kubernetes.io zone and region, a value may list several zones joined by ``__``); a claim still waiting for
its first consumer is passed over. Filter rejects, UnschedulableAndUnresolvable, nodes that carry any of these
labels but not a listed value for each of the PV's keys (a beta key on the PV also matches the node's GA label).
"""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.cluster.volumes import volume_state
from accelsched.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    FilterResult,
    NodeExplanation,
    Status,
    unschedulable,
)

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}
_STATE = "PreFilter" + NAME

Topology = tuple[str, frozenset[str]]  # (label key, the values the PV allows)


def pv_topologies(labels: dict[str, str]) -> list[Topology]:
    """getPVTopologies: each topology label of the PV as a set of values (LabelZonesToSet; a value with an empty
    element is ignored, as kube-scheduler logs and skips it)."""
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            values = [v.strip() for v in labels[key].split("__")]
            if all(values):
                out.append((key, frozenset(values)))
    return out


def _bad(message: str) -> Status:
    return unschedulable(NAME, message, resolvable=False)


class VolumeZone:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        if not pod.volumes:
            return SKIP
        volumes = volume_state(cluster)
        topologies: list[Topology] = []
        for volume in pod.volumes:
            if volume.kind != "persistentVolumeClaim":
                continue
            claim = volumes.claim(pod.namespace, volume.claim_name)
            if claim is None:
                return _bad(f'persistentvolumeclaim "{volume.claim_name}" not found')
            if not claim.volume_name:
                class_name = claim.class_name
                if not class_name:
                    return _bad("PersistentVolumeClaim had no pv name and storageClass name")
                sc = volumes.storage_class(class_name)
                if sc is None:
                    return _bad(f'storageclass.storage.k8s.io "{class_name}" not found')
                if sc.wait_for_first_consumer:
                    continue
                return _bad("PersistentVolume had no name")
            pv = volumes.volume(claim.volume_name)
            if pv is None:
                return _bad(f'persistentvolume "{claim.volume_name}" not found')
            topologies.extend(pv_topologies(pv.labels))
        if not topologies:
            return SKIP
        state[_STATE] = topologies
        return SUCCESS

    def pod_independent(self, pod: Pod, cluster: ClusterState) -> bool:
        return True

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult:
        result = FilterResult()
        topologies: list[Topology] = state.get(_STATE, [])
        if not topologies:
            return result
        constrained = np.zeros(cluster.n, dtype=bool)
        for key in TOPOLOGY_LABELS:
            constrained |= cluster.labels(key).present
        rejected = np.zeros(cluster.n, dtype=bool)
        for key, values in topologies:
            ok = self._in(cluster, key, values)
            ga = GA_LABEL.get(key)
            if ga is not None:  # the node lacks the beta key: its GA label is read instead
                ok |= ~cluster.labels(key).present & self._in(cluster, ga, values)
            rejected |= ~ok
        result.reject(ERR_REASON_CONFLICT, rejected & constrained, resolvable=False)
        return result

    @staticmethod
    def _in(cluster: ClusterState, key: str, values: frozenset[str]) -> np.ndarray:
        col = cluster.labels(key)
        lut = np.array([False] + [v in values for v in col.values], dtype=bool)
        return lut[col.codes + 1]

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation:
        labels = cluster.nodes[node].labels
        details = [
            f"a volume needs {key} in {sorted(values)}, node has "
            + (f"{labels[key]}" if key in labels else labels.get(GA_LABEL.get(key, key), "none"))
            for key, values in state.get(_STATE, [])
            if labels.get(key, labels.get(GA_LABEL.get(key, key))) not in values
        ]
        return NodeExplanation(details, [])


def new(args: dict, handle: object) -> VolumeZone:
    return VolumeZone()
