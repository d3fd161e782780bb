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

The history moves with the clock: ``simulate --queues`` advances it at every instant of the replay. Live mode
(``accelsched run``) keeps one history for the process (``carried``), as it keeps admission fair sharing's ledger:
each rebuilt session goes on from the last one's values (a ClusterQueue that left an annotated tree loses its own, a
new one starts empty, each under its root's half-life now), and each round advances it to the wall clock, so it
decays toward what each ClusterQueue uses between rounds and between sessions (in memory only: a restart starts
it empty). A still input (``schedule``, ``explain``) has no past: the history is empty and the order is Kueue's.
"""

from __future__ import annotations

from collections.abc import Mapping

from accelsched.queues.admissionfairsharing import alpha
from accelsched.queues.api import USAGE_HALF_LIFE_ANNOTATION as ANNOTATION
from accelsched.queues.api import QueueObjects
from accelsched.queues.quota import FlavorResource, Node, QuotaTree

__all__ = ["ANNOTATION", "History", "carried", "history"]


class History:
    """Per ClusterQueue of an annotated tree, its decayed usage (per flavor and resource, Kueue's int64 units)."""

    def __init__(self, tree: QuotaTree, half_lives: Mapping[str, float], now: float | None = None) -> None:
        self.tree = tree
        self.half_life: dict[str, float] = {}  # ClusterQueue -> the half-life of its root (an annotated cohort)
        self.decayed: dict[str, dict[FlavorResource, float]] = {}
        self.now = now
        self.renew(tree, half_lives)

    def renew(self, tree: QuotaTree, half_lives: Mapping[str, float]) -> None:
        """Go on over a new session's tree (live mode's rebuild): a ClusterQueue still under an annotated root keeps
        its decayed usage, under that root's half-life now; one that left loses it; a new one starts empty. The
        clock goes on: the next ``advance`` decays over the time since the last one, whichever session it was in."""
        self.tree = tree
        self.half_life = {
            name: half_lives[node.root().name]
            for name, node in tree.cluster_queues.items()
            if node.root().is_cohort and node.root().name in half_lives
        }
        self.decayed = {name: self.decayed.get(name, {}) for name in self.half_life}

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


def history(
    tree: QuotaTree, cohort_half_lives: Mapping[str, float | None], previous: History | None = None
) -> History | None:
    """The history of the annotated trees, or None when no root cohort carries the annotation. ``previous``: the
    one live mode carries (``carried``), renewed over ``tree`` in place and returned; else a new, empty one."""
    half_lives = {name: h for name, h in cohort_half_lives.items() if h is not None}
    if isinstance(previous, History):
        previous.renew(tree, half_lives)
        out: History | None = previous
    else:
        out = History(tree, half_lives) if half_lives else None
    return out if out is not None and out.half_life else None


def carried(objects: QueueObjects, previous: History | None, now: float) -> History | None:
    """The history a new session of live mode goes on with: ``previous`` (its admission renews it over the session's
    tree), or the first time a new, empty one with its clock at ``now``; None when no Cohort carries the annotation
    (what was kept is dropped). Set it as ``objects.cohort_history``. A session starting from an empty history
    would forget, at every rebuild, who used the cohort before."""
    if not any(c.usage_half_life is not None for c in objects.cohorts.values()):
        return None
    return previous if previous is not None else History(QuotaTree({}, {}, set()), {}, now)
