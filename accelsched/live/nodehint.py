"""The queueing hint of a node event for a pod that only node-object filters rejected (kube-scheduler's Node/Add
and Node/Update hints of NodeUnschedulable, TaintToleration and NodeAffinity, taken together).

Such a pod's verdict on every other node is unchanged by one node's joining or changing, so it can only fit on
that node: it is woken when that node passes those filters for it, and stays unschedulable otherwise (a node
leaving never helps it). kube-scheduler asks each rejecting plugin alone, so a pod that two of them rejected on
different nodes (a dedicated pool's selector elsewhere, its taint there) is requeued by every untainted node that
joins, and fails again the same way; here it is not. What a pod needs of a node is kept as a small signature
(its nodeSelector, required node affinity and tolerations), shared by the pods that have the same one.
"""

from __future__ import annotations

from accelsched.api.objects import Node, Pod
from accelsched.api.selectors import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NodeSelectorTerm,
    Toleration,
    terms_match,
    tolerates_all,
    untolerated_taint,
)
from accelsched.plugins.nodeunschedulable import UNSCHEDULABLE_TAINT

# The filters this hint can judge from a node object; a pod another plugin rejected is woken by any node event.
MODELED = frozenset({"NodeUnschedulable", "TaintToleration", "NodeAffinity"})
MAX_SIGNATURES = 10_000  # distinct signatures shared at once; past it the table starts over (bounded memory)

Signature = tuple[tuple[tuple[str, str], ...], tuple[NodeSelectorTerm, ...] | None, tuple[Toleration, ...]]


class Signatures:
    """One shared signature per distinct need (pods of one controller have the same), in a bounded table."""

    def __init__(self) -> None:
        self._table: dict[Signature, Signature] = {}

    def of(self, pod: Pod) -> Signature:
        signature = (tuple(sorted(pod.node_selector.items())), pod.required_node_affinity, pod.tolerations)
        if len(self._table) >= MAX_SIGNATURES:
            self._table.clear()
        return self._table.setdefault(signature, signature)


def node_passes(signature: Signature, node: Node) -> bool:
    """Whether ``node`` passes the modeled filters for a pod that needs ``signature`` (their filter rules)."""
    selector, terms, tolerations = signature
    if any(node.labels.get(key) != value for key, value in selector):
        return False
    if terms is not None and not terms_match(terms, node.name, node.labels):
        return False
    if untolerated_taint(tolerations, node.taints, (NO_SCHEDULE, NO_EXECUTE)) is not None:
        return False
    return not (node.unschedulable and not tolerates_all(tolerations, UNSCHEDULABLE_TAINT))


def may_help(plugins: frozenset[str], static: frozenset[str], signature: Signature | None, node: Node | None) -> bool:
    """Whether a node event may let in a pod that ``plugins`` rejected: ``node`` is the node as it is now (None:
    it left); ``static`` the profile's node-object filters. True when the rejection is not known or another plugin
    took part."""
    if not plugins or signature is None or not plugins <= static & MODELED:
        return True
    return node is not None and node_passes(signature, node)
