"""Which bound pods a label selector or a pod affinity term counts: the matching rules ClusterState's per-node
counts (selector counts, affinity term groups) and the InterPodAffinity plugin share."""

from __future__ import annotations

from dataclasses import dataclass

from accelsched.api.objects import Pod
from accelsched.api.selectors import LabelSelector

ALL_NAMESPACES = None  # a namespace filter of None means every namespace

NamespaceFilter = frozenset[str] | None
# Pods matching all of several (selector, namespaces) pairs: how required pod affinity terms are counted.
Conditions = tuple[tuple[LabelSelector, NamespaceFilter], ...]


@dataclass(frozen=True)
class TermGroup:
    """Bound pods carrying the same affinity term (same selector, namespaces, key): counted per node.

    ``namespaces`` holds the term's listed namespaces (or its owner's); a namespaceSelector stays a selector,
    matched against the incoming pod's namespace labels when asked, as kube-scheduler does at filter time.
    """

    selector: LabelSelector | None
    namespaces: NamespaceFilter
    topology_key: str
    weight: int
    namespace_selector: LabelSelector | None = None


def index_key(conditions: Conditions) -> tuple[str, str, str] | None:
    """A (namespace, label key, value) that every pod matching ``conditions`` carries: from a condition of one
    namespace whose selector has matchLabels. None when there is none (all namespaces, expressions only)."""
    for selector, namespaces in conditions:
        if namespaces is not None and len(namespaces) == 1 and selector.match_labels:
            (namespace,) = namespaces
            key, value = selector.match_labels[0]
            return namespace, key, value
    return None


def _pod_matches(pod: Pod, selector: LabelSelector, namespaces: NamespaceFilter) -> bool:
    return (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels)


def pod_matches_all(pod: Pod, conditions: Conditions) -> bool:
    return all(_pod_matches(pod, sel, ns) for sel, ns in conditions)


def pod_matches_term(pod: Pod, selector: LabelSelector | None, namespaces: NamespaceFilter) -> bool:
    """Whether ``pod`` is selected by an affinity term (a nil selector selects nothing)."""
    return selector is not None and _pod_matches(pod, selector, namespaces)
