"""The live sample: the same scenarios scheduled by ``accelsched run`` (the LiveScheduler class the command runs,
in-process) on the same API server, compared with accelsched offline.

Its profiles are renamed (``accelsched-live``...) so kube-scheduler leaves their pods alone; kube-scheduler still
answers the sync probe, and accelsched's informers get a short settle time after it (they watch the same streams).
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from conformance import configs, offline
from conformance.outcome import differences
from conformance.real import OracleError, RealCluster
from conformance.scenario import Scenario

LIVE_PREFIX = "accelsched-live"
SETTLE_SECONDS = 0.3


def live_names(group: str) -> dict[str, str]:
    return {name: f"{LIVE_PREFIX}-{i}" for i, name in enumerate(configs.profile_names(group))}


def for_live(scenario: Scenario) -> Scenario:
    """The scenario with its pending pods sent to accelsched's renamed profiles."""
    names = live_names(scenario.config)
    out = scenario.copy()
    for pod in out.pending:
        pod["spec"]["schedulerName"] = names[pod["spec"].get("schedulerName", "default-scheduler")]
    return out


def sample(cluster: RealCluster, scenarios: list[Scenario]) -> dict[str, Any]:
    """Each scenario live (accelsched run) and offline; counts and the differences (live as the reference)."""
    from accelsched.live.kube import Kube, api_client
    from accelsched.live.scheduler import LiveScheduler

    agree, of, diffs = 0, 0, []
    by_group: dict[str, list[Scenario]] = {}
    for s in scenarios:
        by_group.setdefault(s.config, []).append(s)
    for group, items in by_group.items():
        doc = configs.scheduler_config(group)
        names = live_names(group)
        for p in doc["profiles"]:
            p["schedulerName"] = names[p["schedulerName"]]
        doc["clientConnection"] = dict(configs.CLIENT_CONNECTION)
        path = cluster.workdir / f"accelsched-live-{group}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        try:
            scheduler = LiveScheduler(Kube(api_client(str(cluster.cp.kubeconfig))), str(path), watch_timeout=60)
        except Exception as exc:  # e.g. a config accelsched does not accept yet
            diffs.extend(f"live-error: {group}: {exc}" for _ in items)
            of += len(items)
            continue
        scheduler.start()
        try:
            deadline = time.monotonic() + 30
            while not scheduler.synced and time.monotonic() < deadline:
                time.sleep(0.05)
            for s in items:
                live = for_live(s)
                try:
                    got = cluster.run(live, settle=SETTLE_SECONDS)
                except OracleError as exc:
                    diffs.append(f"live-error: {exc}".splitlines()[0])
                    of += 1
                    continue
                ours = offline.run(live, {o.pod: o.node for o in got if o.node}, config=doc)
                found = differences(got, ours)
                of += 1
                agree += not found
                diffs.extend(found)
        finally:
            scheduler.stop()
    return {"agree": agree, "of": of, "diffs": diffs}

