"""DynamicResources: kube-scheduler 1.36's DRA plugin, for now only its PreFilter and PostFilter for pods.

kube-scheduler runs it by default, right before DefaultPreemption (apis/config/v1/default_plugins.go:
applyDynamicResources), so its PostFilter speaks first in every FailedScheduling message: a pod without claims gets
``no new claims to deallocate, preemption: ...``. Allocating claims (Filter, Reserve, PreBind) is issue 13; here a
pod with claims gets the answer the real plugin gives when none of its claims is allocated yet.
"""

from __future__ import annotations

from typing import Any

from accelsched.api.objects import Pod
from accelsched.cluster.state import ClusterState
from accelsched.errors import InputError
from accelsched.framework.interface import SKIP, Code, CycleState, Status, unschedulable

NAME = "DynamicResources"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
# CycleState.Read's fwk.ErrNotFound: what PostFilter answers when PreFilter never ran (an earlier PreFilter plugin
# rejected the pod as unresolvable), as an Error that stops the PostFilter plugins after it.
STATE_NOT_FOUND = "not found"
ARGS = ("filterTimeout", "bindingTimeout")  # DynamicResourcesArgs


def pod_claims(pod: Pod) -> list[Any]:
    """spec.resourceClaims: the claims the pod references (extended resources backed by DRA are not modelled)."""
    return list((pod.raw.get("spec") or {}).get("resourceClaims") or [])


class DynamicResources:
    name = NAME

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status:
        """Records that PreFilter ran and whether the pod has claims; a pod without claims skips Filter."""
        claims = pod_claims(pod)
        state[NAME] = claims
        return SKIP if not claims else Status()

    def post_filter(self, state: CycleState, pod: Pod, handle: Any, diagnosis: Any) -> tuple[None, Status]:
        """Never nominates: for a pod without claims ``no new claims to deallocate`` (Unschedulable, so the next
        PostFilter plugin, DefaultPreemption, runs after it)."""
        if NAME not in state:
            return None, Status(Code.ERROR, (STATE_NOT_FOUND,), NAME)
        if not state[NAME]:
            return None, unschedulable(NAME, NO_CLAIMS_TO_DEALLOCATE)
        return None, unschedulable(NAME, STILL_NOT_SCHEDULABLE)


def new(args: dict, handle: object) -> DynamicResources:
    """DynamicResourcesArgs (filterTimeout, bindingTimeout) are accepted: nothing here waits on a driver."""
    where = f"pluginConfig {NAME}"
    unknown = set(args) - set(ARGS)
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}", obj=where, field="args")
    for key in ARGS:
        if key in args and not isinstance(args[key], str):
            raise InputError(f"must be a duration such as 10s, got {args[key]!r}", obj=where, field=f"args.{key}")
    return DynamicResources()
