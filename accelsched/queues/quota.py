"""The quota tree: ClusterQueues under (hierarchical) Cohorts, each node's quota and usage per flavor and resource.

Kueue's pkg/cache/scheduler/resource_node.go, in Python. Each node keeps ``quotas`` (its own nominalQuota,
borrowingLimit and lendingLimit per (flavor, resource)), ``subtree`` (the quota it holds: a ClusterQueue its
nominal, a Cohort its own plus what its children lend it) and ``usage``. What a node may use is its local quota
(what it keeps back from lending) plus what its parent has available, capped by its borrowingLimit; usage past
the local quota is stored in the parent, and so on up. A cohort named by a ClusterQueue but never defined is a
cohort without quota of its own, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from accelsched.queues.api import Cohort, QueueObjects, ResourceGroup, ResourceQuota

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass
class Node:
    """A ClusterQueue or a Cohort in the tree."""

    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, ResourceQuota] = field(default_factory=dict)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    weight: float = 1.0  # spec.fairSharing.weight (parseFairWeight: AsFloat64Slow), read by queues.fairsharing

    def local_quota(self, fr: FlavorResource) -> int:
        """What the node keeps for itself: all of its subtree's quota past its lendingLimit (0 without one)."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def available(self, fr: FlavorResource) -> int:
        """What the node could use now without preempting anything (Kueue's ``available``; negative in debt)."""
        if self.parent is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        parent_available = self.parent.available(fr)
        quota = self.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            local = self.local_quota(fr)
            stored_in_parent = self.subtree.get(fr, 0) - local
            used_in_parent = max(0, self.usage.get(fr, 0) - local)
            parent_available = min(stored_in_parent - used_in_parent + quota.borrowing_limit, parent_available)
        return self.local_available(fr) + parent_available

    def potential_available(self, fr: FlavorResource) -> int:
        """The most the node could ever use, with everything else in the tree idle."""
        if self.parent is None:
            return self.subtree.get(fr, 0)
        potential = self.local_quota(fr) + self.parent.potential_available(fr)
        quota = self.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            potential = min(self.subtree.get(fr, 0) + quota.borrowing_limit, potential)
        return potential

    def add_usage(self, fr: FlavorResource, amount: int) -> None:
        usage = self.usage.get(fr, 0)  # read once: preemption's search takes and gives back hundreds per head
        local_available = max(0, self.local_quota(fr) - usage)
        self.usage[fr] = usage + amount
        if self.parent is not None and amount > local_available:
            self.parent.add_usage(fr, amount - local_available)

    def remove_usage(self, fr: FlavorResource, amount: int) -> None:
        usage = self.usage.get(fr, 0)
        stored_in_parent = usage - self.local_quota(fr)
        self.usage[fr] = usage - amount
        if stored_in_parent > 0 and self.parent is not None:
            self.parent.remove_usage(fr, min(amount, stored_in_parent))

    def borrowing_with(self, fr: FlavorResource, amount: int) -> bool:
        """Whether using ``amount`` more would take the node past its own subtree quota (BorrowingWith)."""
        return self.subtree.get(fr, 0) < self.usage.get(fr, 0) + amount

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        """The top of the node's tree. In a cohort loop (its ClusterQueues are inactive, Kueue's rule) there is no
        top: the loop's node with the smallest name stands for it, the same from wherever the walk starts."""
        node, seen = self, {id(self): self}
        while node.parent is not None:
            node = node.parent
            if id(node) in seen:  # a loop: the nodes from here back to here
                loop = [node]
                walker = node.parent
                while walker is not None and walker is not node:
                    loop.append(walker)
                    walker = walker.parent
                return min(loop, key=lambda n: n.name)
            seen[id(node)] = node
        return node

    def height(self) -> int:
        """getNodeHeight: a cohort with children is at least 1 high, one more per level of child cohorts."""
        height = min(len(self.children), 1)
        for child in self.children:
            if child.is_cohort:
                height = max(height, child.height() + 1)
        return height


def _quotas(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, ResourceQuota]:
    return {(fq.name, q.name): q for rg in groups for fq in rg.flavors for q in fq.resources}


@dataclass
class QuotaTree:
    """Every ClusterQueue's node, and the cohorts above them."""

    cluster_queues: dict[str, Node]
    cohorts: dict[str, Node]
    in_cycle: set[str]  # ClusterQueues whose cohort chain loops: Kueue makes them inactive

    def height_of_lowest_subtree_that_fits(self, cq: Node, fr: FlavorResource, amount: int) -> tuple[int, bool]:
        """FindHeightOfLowestSubtreeThatFits: how far up the workload borrows (0: not at all), and whether the
        subtree that fits is smaller than the whole tree (so a reclaim inside it may free the room)."""
        if not cq.borrowing_with(fr, amount) or cq.parent is None:
            return 0, cq.parent is not None
        remaining = amount - cq.local_available(fr)
        for node in cq.ancestors():
            if not node.borrowing_with(fr, remaining):
                return node.height(), node.parent is not None
            remaining -= node.local_available(fr)
        return cq.root().height(), False


def build(objects: QueueObjects) -> QuotaTree:
    """The tree of the input's ClusterQueues and Cohorts, with every node's subtree quota (usage all zero)."""
    cohorts: dict[str, Node] = {}

    def cohort(name: str) -> Node:
        if name not in cohorts:
            spec = objects.cohorts.get(name) or Cohort(name)
            cohorts[name] = Node(name, True, _quotas(spec.resource_groups), weight=float(spec.fair_weight))
        return cohorts[name]

    for name in objects.cohorts:
        cohort(name)
    for spec in objects.cohorts.values():
        if spec.parent:
            cohorts[spec.name].parent = cohort(spec.parent)
    cluster_queues = {}
    for cq in objects.cluster_queues.values():
        node = Node(cq.name, False, _quotas(cq.resource_groups), weight=float(cq.fair_weight))
        if cq.cohort:
            node.parent = cohort(cq.cohort)
        cluster_queues[cq.name] = node
    in_cycle = {name for name, node in cluster_queues.items() if _loops(node)}
    for node in cohorts.values():
        if node.parent is not None and not _loops(node):
            node.parent.children.append(node)
    for name, node in cluster_queues.items():
        if node.parent is not None and name not in in_cycle:
            node.parent.children.append(node)
    for node in cohorts.values():
        if node.parent is None:
            _accumulate(node)
    for name, node in cluster_queues.items():
        if node.parent is None or name in in_cycle:
            node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    return QuotaTree(cluster_queues, cohorts, in_cycle)


def _loops(node: Node) -> bool:
    seen = {id(node)}
    for ancestor in node.ancestors():
        if id(ancestor) in seen:
            return True
        seen.add(id(ancestor))
    return False


def _accumulate(node: Node) -> None:
    """updateCohortResourceNode: a cohort's subtree quota is its own nominal plus what each child lends it."""
    node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
    for child in node.children:
        if child.is_cohort:
            _accumulate(child)
        else:
            child.subtree = {fr: q.nominal for fr, q in child.quotas.items()}
        for fr, quota in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0) + quota - child.local_quota(fr)
