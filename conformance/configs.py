"""The KubeSchedulerConfiguration groups scenarios run under: the same document for kube-scheduler and accelsched.

kube-scheduler is restarted per group, so scenarios are run grouped by config. ``profiles`` has two profiles; its
scenarios' pods pick one by schedulerName.
"""

from __future__ import annotations

import copy
from typing import Any

API_VERSION = "kubescheduler.config.k8s.io/v1"
SECOND_PROFILE = "second-scheduler"

_PROFILES: dict[str, list[dict[str, Any]]] = {
    "default": [{"schedulerName": "default-scheduler"}],
    # Reweighted scores and plugin args: MostAllocated, defaultConstraints, hardPodAffinityWeight.
    "weighted": [
        {
            "schedulerName": "default-scheduler",
            "plugins": {
                "multiPoint": {
                    "enabled": [
                        {"name": "TaintToleration", "weight": 1},
                        {"name": "NodeAffinity", "weight": 5},
                        {"name": "InterPodAffinity", "weight": 3},
                        {"name": "NodeResourcesFit", "weight": 4},
                    ]
                }
            },
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                        }
                    },
                },
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                             "whenUnsatisfiable": "ScheduleAnyway"}
                        ],
                    },
                },
                {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
            ],
        }
    ],
    # RequestedToCapacityRatio over cpu and an extended resource; BalancedAllocation over cpu and the accelerator.
    "ratio": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "RequestedToCapacityRatio",
                            "resources": [
                                {"name": "cpu", "weight": 1},
                                {"name": "qualcomm.com/ai-accelerator", "weight": 3},
                            ],
                            "requestedToCapacityRatio": {
                                "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
                            },
                        }
                    },
                },
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu", "weight": 1}, {"name": "qualcomm.com/ai-accelerator",
                                                                           "weight": 1}]},
                },
            ],
        }
    ],
    # Two profiles; the second without TaintToleration's filter and with ImageLocality weighted up.
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {
            "schedulerName": SECOND_PROFILE,
            "plugins": {
                "filter": {"disabled": [{"name": "TaintToleration"}]},
                "score": {
                    "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                    "enabled": [{"name": "ImageLocality", "weight": 5}],
                },
            },
        },
    ],
}
GROUPS = tuple(_PROFILES)


def scheduler_config(group: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of ``group`` as accelsched reads it (no client connection)."""
    profiles = copy.deepcopy(_PROFILES[group])
    return {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration", "profiles": profiles}


# The client throttle of both schedulers (clientConnection qps and burst): the live sample's accelsched run gets the
# real kube-scheduler's, since both apply it (at kube-scheduler's default 50 and 100 a live scenario's writes
# trickled out while the sample's settle check, 0.3 s without a change, was already done).
CLIENT_CONNECTION = {"qps": 500, "burst": 1000}


def kube_scheduler_config(group: str, kubeconfig: str) -> dict[str, Any]:
    """The same configuration for the real kube-scheduler: the admin kubeconfig, no leader election."""
    doc = scheduler_config(group)
    doc["clientConnection"] = {"kubeconfig": kubeconfig, **CLIENT_CONNECTION}
    doc["leaderElection"] = {"leaderElect": False}
    return doc


def profile_names(group: str) -> list[str]:
    return [p["schedulerName"] for p in _PROFILES[group]]
