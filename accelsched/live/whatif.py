"""Read-only what-if on a live cluster: one list of everything, then the offline engine on that snapshot."""

from __future__ import annotations

from accelsched.engine import Session
from accelsched.framework.profile import SchedulerConfig
from accelsched.live import convert as live_convert
from accelsched.live import snapshot as live_snapshot
from accelsched.live.kube import Kube


def read_cluster(kube: Kube) -> live_convert.Snapshot:
    """Everything ``accelsched run`` reads, listed once (live/snapshot.py)."""
    return live_snapshot.list_snapshot(kube)


def session_from_cluster(
    kube: Kube, config: SchedulerConfig | None = None, seed: int = 0
) -> tuple[Session, live_convert.Converted]:
    """A Session over the live snapshot with every pending pod (of any schedulerName) to try."""
    converted = live_convert.convert(read_cluster(kube))
    return live_convert.start_session(converted, config, seed), converted
