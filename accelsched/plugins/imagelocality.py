"""ImageLocality: favour nodes that already hold the pod's container images (kube-scheduler 1.36).

Each image of the pod (init and app containers, image volumes) found in a node's status.images adds its size,
scaled by the share of all nodes that have it (so an image everywhere does not pull every pod to one node). The
sum is clamped to [23 MiB, 1000 MiB x containers] and mapped linearly onto 0..100, in Go's integer arithmetic.
Names are matched after normalizedImageName (``:latest`` added to an untagged name), as kube-scheduler does.
"""

from __future__ import annotations

import numpy as np

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.framework.interface import MAX_NODE_SCORE, CycleState, NodeScore

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """calculatePriority: the clamped sum scaled onto 0..MaxNodeScore (integer division, as Go's int64)."""
    top = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = min(max(sum_scores, MIN_THRESHOLD), top)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


def _priorities(sums: np.ndarray, num_containers: int) -> np.ndarray:
    top = MAX_CONTAINER_THRESHOLD * num_containers
    return MAX_NODE_SCORE * (np.clip(sums, MIN_THRESHOLD, top) - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


def _image_mask(cluster: ClusterState, name: str) -> np.ndarray:
    def build() -> np.ndarray:
        mask = np.zeros(cluster.n, dtype=bool)
        mask[cluster.image_nodes(name)] = True
        return mask

    return cluster.memoized((NAME, "nodes", name), build)


class ImageLocality:
    name = NAME

    def node_score(self, state: CycleState, pod: Pod, cluster: ClusterState) -> NodeScore | int:
        """A node-local score (the images of a node never change within a state); the constant 0 when no node
        holds any of the pod's images, which is every pod on nodes without status.images."""
        if not cluster.has_images:
            return 0
        key = (NAME, pod.images, pod.container_count)
        return cluster.memoized(key, lambda: self._node_score(key, pod, cluster))

    @staticmethod
    def _node_score(key: tuple, pod: Pod, cluster: ClusterState) -> NodeScore | int:
        # One term per image of the pod, repeats included (two containers of one image count it twice).
        parts = [
            (cluster.scaled_image_score(name), _image_mask(cluster, name))
            for name in pod.images
            if cluster.image_nodes(name)
        ]
        if not parts:
            return 0
        count = pod.container_count

        def compute(nodes: np.ndarray) -> np.ndarray:
            sums = np.zeros(len(nodes), dtype=np.int64)
            for score, mask in parts:
                sums += score * mask[nodes]
            return _priorities(sums, count)

        def compute_one(node: int) -> int:
            return calculate_priority(sum(score for score, mask in parts if mask[node]), count)

        return NodeScore(key, compute, compute_one)

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        spec = self.node_score(state, pod, cluster)
        if isinstance(spec, int):
            return spec
        return spec.values(cluster)[feasible]


def new(args: dict, handle: object) -> ImageLocality:
    return ImageLocality()
