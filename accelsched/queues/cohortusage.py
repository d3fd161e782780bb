"""Fair sharing over time across a cohort's ClusterQueues: accelsched's own extension, not Kueue's (kueue#9734).

Kueue's fair sharing (queues.fairsharing) compares the ClusterQueues of a cohort by what they use now; its
admission fair sharing (queues.admissionfairsharing) remembers usage, but only between the LocalQueues of one
ClusterQueue. With the annotation ``accelsched.io/fair-sharing-usage-half-life`` (a Go duration, e.g. ``1h``) on
the root Cohort of a tree, the cycle's tournament between that tree's ClusterQueues (fair sharing on) compares
their dominant resource shares on what each uses now plus its decayed usage: an exponential moving average of its
usage over time, with that half-life, as admission fair sharing decays a LocalQueue's. A ClusterQueue that used
more than its share for a while then yields to the others until its history decays. Everything else is Kueue's:
which heads are nominated, the no-borrowing-first rule (on current usage), preemption. Kueue ignores the
annotation, so the same objects run unchanged under Kueue. Without it (the default) nothing changes.

The history moves with the clock: ``simulate --queues`` advances it at every instant of the replay. A still input
(``schedule``, ``explain``) has no past: the history is empty and the order is Kueue's.
"""

from __future__ import annotations

from collections.abc import Mapping

from accelsched.queues.admissionfairsharing import alpha
from accelsched.queues.api import USAGE_HALF_LIFE_ANNOTATION as ANNOTATION
from accelsched.queues.quota import FlavorResource, Node, QuotaTree

__all__ = ["ANNOTATION", "History", "history"]


class History:
    """Per ClusterQueue of an annotated tree, its decayed usage (per flavor and resource, Kueue's int64 units)."""

    def __init__(self, tree: QuotaTree, half_lives: Mapping[str, float]) -> None:
        self.tree = tree
        # ClusterQueue -> the half-life of its root (a root cohort carrying the annotation)
        self.half_life = {
            name: half_lives[node.root().name]
            for name, node in tree.cluster_queues.items()
            if node.root().is_cohort and node.root().name in half_lives
        }
        self.decayed: dict[str, dict[FlavorResource, float]] = {name: {} for name in self.half_life}
        self.now: float | None = None

    def advance(self, now: float) -> None:
        """Each ClusterQueue's decayed usage moves toward its usage since the last call (constant in between)."""
        if self.now is not None and now > self.now:
            for name, h in self.half_life.items():
                a = alpha(now - self.now, h)
                usage = self.tree.cluster_queues[name].usage
                old = self.decayed[name]
                self.decayed[name] = {
                    fr: (1 - a) * old.get(fr, 0.0) + a * usage.get(fr, 0) for fr in set(old) | set(usage)
                }
        self.now = now

    def usage(self, node: Node) -> dict[FlavorResource, int]:
        """What the tournament adds to a ClusterQueue's usage: its decayed usage, in whole units."""
        return {fr: round(v) for fr, v in self.decayed.get(node.name, {}).items() if round(v)}


def history(tree: QuotaTree, cohort_half_lives: Mapping[str, float | None]) -> History | None:
    """The history of the annotated trees, or None when no root cohort carries the annotation."""
    half_lives = {name: h for name, h in cohort_half_lives.items() if h is not None}
    out = History(tree, half_lives) if half_lives else None
    return out if out is not None and out.half_life else None
