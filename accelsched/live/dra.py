"""Live mode's DRA side: the resource.k8s.io/v1 objects read from the cluster, and kube-scheduler's PreBind writes.

Reading. DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates come from informers
(live.scheduler) and go through the same parsers as files (dra/objects.py), one object at a time: one bad object is
left out and reported, the rest is scheduled (live.convert's rule). Claims change on every allocation and
deallocation, so the scheduler follows a claim event in place (``apply_claims``) rather than rebuilding its
session; classes, slices and templates change rarely and rebuild it.

Writing. ``ClaimWriter.write_allocation`` is the DynamicResources plugin's PreBind for one claim
(dynamicresources.go bindClaim): the finalizer ``resource.kubernetes.io/delete-protection`` is added with an Update
of the claim (the finalizer is metadata), then an UpdateStatus writes ``status.allocation`` and appends the pod to
``status.reservedFor``; a 409 Conflict re-reads the claim and tries again (client-go's RetryOnConflict with
DefaultRetry: 5 tries, 10 ms apart). A claim that was allocated already (shared by several pods) only gets the
reservation. Any failure raises ClaimWriteError with kube-scheduler's wording, and the pod is not bound.

Extended resources backed by DRA (a DeviceClass's ``extendedResourceName``): PreBind first creates the pod's claim
(``ClaimWriter.create``: annotation ``resource.kubernetes.io/extended-resource-claim``, the pod its controller), then
writes it as any claim, then patches the pod's ``status.extendedResourceClaimStatus``; Unreserve deletes the claim
(finalizer removed first), as extendeddynamicresources.go does. One difference: kube-scheduler creates the claim with
``generateName`` and learns its name from the answer; accelsched sends the name it planned at Reserve
(``<pod>-extended-resources-`` and five characters of the API server's alphabet, dra/extended.py ``created_claim``),
so the session and the write in flight name the same claim before the API server answers.

In the live loop these writes run in the binding cycle, before the Binding, as kube-scheduler runs PreBind in the
binding goroutine: the session's DRA state calls its ``writer`` at PreBind, which in live mode is the scheduler's
``DeferredClaimWriter``: it records the write for the pod's decision, and the bind worker does it through
``ClaimWriter``. Until the informer shows the
write, the claim is *assumed* (``AssumedClaims``): every rebuild and every claim event sees it allocated and
reserved as we wrote it, so its devices are never handed out twice while the write is in flight.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelsched.dra import model
from accelsched.dra.extended import EXTENDED_RESOURCE_CLAIM_ANNOTATION, claim_status
from accelsched.dra.state import allocation_dict, consumer_dict, dra_state
from accelsched.live.informer import object_key
from accelsched.live.kube import JSON, PODS, ApiError, Kube, Resource

API = "/apis/resource.k8s.io/v1"
DEVICE_CLASSES = Resource(API, "deviceclasses", namespaced=False)
RESOURCE_SLICES = Resource(API, "resourceslices", namespaced=False)
RESOURCE_CLAIMS = Resource(API, "resourceclaims")
RESOURCE_CLAIM_TEMPLATES = Resource(API, "resourceclaimtemplates")
# kind -> where it lives: the informers live/scheduler.py keeps.
RESOURCES = {
    "DeviceClass": DEVICE_CLASSES,
    "ResourceSlice": RESOURCE_SLICES,
    "ResourceClaim": RESOURCE_CLAIMS,
    "ResourceClaimTemplate": RESOURCE_CLAIM_TEMPLATES,
}
# client-go's retry.DefaultRetry: Steps 5, Duration 10 ms, Factor 1.0 (Jitter 0.1 left out).
RETRY_STEPS = 5
RETRY_SECONDS = 0.01

log = logging.getLogger("accelsched.live")


# ---------------------------------------------------------------------------------------------- reading


def pod_claim_names(pod: JSON) -> set[str]:
    """The ResourceClaims a pod object uses, as far as known: spec.resourceClaims[].resourceClaimName, and for
    template claims the name the resourceclaim controller reported in status.resourceClaimStatuses."""
    names = {
        str(c["resourceClaimName"])
        for c in (pod.get("spec") or {}).get("resourceClaims") or []
        if isinstance(c, dict) and c.get("resourceClaimName")
    }
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if isinstance(status, dict) and status.get("resourceClaimName"):
            names.add(str(status["resourceClaimName"]))
    return names


def has_claims(pod: JSON) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def generated_claims_changed(old: JSON, new: JSON) -> bool:
    """The pod update DynamicResources queues a pod for (UpdatePodGeneratedResourceClaim): the resourceclaim
    controller wrote the names of the claims it made from the pod's templates."""
    def statuses(pod: JSON) -> Any:
        return (pod.get("status") or {}).get("resourceClaimStatuses")

    return has_claims(new) and statuses(old) != statuses(new)


def claim_event_wakes(pod: JSON, old: JSON | None, new: JSON) -> bool:
    """isSchedulableAfterClaimChange for an unschedulable pod with claims: a claim deallocated (its devices are
    free for anyone), or one of the pod's own claims created or with a changed status."""
    old_status, new_status = (old or {}).get("status") or {}, new.get("status") or {}
    if old is not None and old_status.get("allocation") and not new_status.get("allocation"):
        return True
    meta = new.get("metadata") or {}
    if meta.get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    if meta.get("name") not in pod_claim_names(pod) and not _owned_by(new, pod):
        return False
    return old is None or old_status != new_status


def is_extended_claim_doc(claim: JSON) -> bool:
    """The claim kube-scheduler creates for a pod's extended resources (its annotation)."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"


def _owned_by(claim: JSON, pod: JSON) -> bool:
    uid = (pod.get("metadata") or {}).get("uid")
    refs = (claim.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, dict) and r.get("controller") and r.get("uid") == uid for r in refs)


# ---------------------------------------------------------------------------------------------- writing


class ClaimWriteError(RuntimeError):
    """PreBind could not write a claim; the message is kube-scheduler's (bindClaim's errors)."""


def consumer_reference(pod: Any) -> JSON:
    """status.reservedFor's entry for a pod: ResourceClaimConsumerReference{resource: pods, name, uid} (the
    core group, "", is omitted as the API omits it)."""
    return consumer_dict(model.ResourceClaimConsumerReference("pods", pod.name, pod.uid))


def reserved_for_pod(claim: JSON, uid: str) -> bool:
    """resourceclaim.IsReservedForPod: the pod's uid is among status.reservedFor."""
    return any(
        isinstance(r, dict) and r.get("resource") == "pods" and not r.get("apiGroup") and r.get("uid") == uid
        for r in (claim.get("status") or {}).get("reservedFor") or []
    )


def to_api_allocation(allocation: model.AllocationResult, now: str | None = None) -> JSON:
    """status.allocation as the API holds it (dra/state.py's allocation_dict, the one writer of that form), with
    ``allocationTimestamp`` set to ``now`` when the allocation has none: kube-scheduler sets it at PreBind when it is
    unset (DRADeviceBindingConditions and DRAResourceClaimDeviceStatus are on in 1.36)."""
    out = allocation_dict(allocation)
    if now and not out.get("allocationTimestamp"):
        out["allocationTimestamp"] = now
    return out


def timestamp() -> str:
    """metav1.Time's JSON form: RFC 3339 in UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ClaimWriter:
    """kube-scheduler's PreBind for one claim, through the API (see the module docstring)."""

    def __init__(self, kube: Kube, sleep: Callable[[float], None] = time.sleep) -> None:
        self.kube = kube
        self.sleep = sleep

    def write_allocation(
        self,
        claim: model.ResourceClaim,
        allocation: model.AllocationResult | None,
        pod: Any,
        current: JSON | None = None,
    ) -> JSON:
        """Write ``allocation`` (None: the claim was allocated already, only reserve it) and the pod's
        reservation to ``claim`` (``current``: as the API holds it, when known better than the cache's copy);
        returns the claim as the API holds it afterwards. Raises ClaimWriteError."""
        current = copy.deepcopy(current or claim.raw) or None
        name = f"{claim.namespace}/{claim.name}"
        for attempt in range(RETRY_STEPS):
            if current is None or attempt > 0:
                try:
                    current = self.kube.get(RESOURCE_CLAIMS, claim.name, claim.namespace)
                except ApiError as exc:
                    raise ClaimWriteError(f"get updated claim {name} after conflict: {exc.message}") from None
            try:
                return self._attempt(current, name, allocation, pod)
            except _Conflict as exc:
                if attempt == RETRY_STEPS - 1:
                    raise ClaimWriteError(exc.message) from None
                self.sleep(RETRY_SECONDS)
        raise AssertionError("unreachable")

    def _attempt(self, claim: JSON, name: str, allocation: model.AllocationResult | None, pod: Any) -> JSON:
        meta = claim.setdefault("metadata", {})
        if meta.get("deletionTimestamp"):
            raise ClaimWriteError(f"claim {name} got deleted in the meantime")
        if reserved_for_pod(claim, pod.uid):
            return claim  # an earlier attempt got through (its answer lost): PreBind skips a reserved claim
        claim["apiVersion"], claim["kind"] = model.API_VERSION, "ResourceClaim"
        status = claim.setdefault("status", {})
        if allocation is not None:
            if status.get("allocation"):
                raise ClaimWriteError(f"claim {name} got allocated elsewhere in the meantime")
            finalizers = list(meta.get("finalizers") or [])
            if model.FINALIZER not in finalizers:
                meta["finalizers"] = [*finalizers, model.FINALIZER]
                claim = self._put(claim, None, f"add finalizer to claim {name}")
                status = claim.setdefault("status", {})
            status["allocation"] = to_api_allocation(allocation)
        elif not status.get("allocation"):
            raise ClaimWriteError(f"claim {name} got deallocated elsewhere in the meantime")
        status["reservedFor"] = [*(status.get("reservedFor") or []), consumer_reference(pod)]
        status["allocation"].setdefault("allocationTimestamp", timestamp())
        what = "add allocation and reservation to claim" if allocation is not None else "add reservation to claim"
        return self._put(claim, "status", f"{what} {name}")

    def create(self, claim: model.ResourceClaim) -> JSON:
        """createExtendedResourceClaimInAPI: the pod's extended-resource claim created, without status (the name
        planned, see the module docstring; the uid the API server's). Raises ClaimWriteError."""
        meta = {key: v for key, v in (claim.raw.get("metadata") or {}).items() if key not in ("uid", "resourceVersion")}
        body = {"apiVersion": model.API_VERSION, "kind": "ResourceClaim", "metadata": meta, "spec": claim.raw["spec"]}
        try:
            return self.kube.create(RESOURCE_CLAIMS, body, claim.namespace)
        except ApiError as exc:  # upstream names the claim before the API server named it: "<namespace>/"
            raise ClaimWriteError(f"create claim for extended resources {claim.namespace}/: {exc.message}") from None

    def extended_status(self, pod: Any, claim: JSON, mappings: Iterable[Mapping[str, str]]) -> None:
        """patchPodExtendedResourceClaimStatus: the pod's status names its extended-resource claim and which
        container request each device request serves. Raises ClaimWriteError."""
        status = claim_status(claim["metadata"]["name"], mappings)
        namespace = claim["metadata"]["namespace"]
        try:
            self.kube.patch(PODS, pod.name, {"status": {"extendedResourceClaimStatus": status}}, namespace, "status")
        except ApiError as exc:
            raise ClaimWriteError(
                f"update pod {namespace}/{pod.name} ExtendedResourceClaimStatus: {exc.message}"
            ) from None

    def unreserve(self, claim: JSON, pod: Any) -> None:
        """Unreserve: take the pod off an allocated claim's reservedFor with a strategic merge patch of the status
        (the claim's uid as precondition); the allocation stays, as upstream. A failure is only logged there too.
        The pod's extended-resource claim is deleted instead (unreserveExtendedResourceClaim)."""
        if _owned_by(claim, {"metadata": {"uid": pod.uid}}) and is_extended_claim_doc(claim):
            self._delete(claim)
            return
        if not (claim.get("status") or {}).get("allocation") or not reserved_for_pod(claim, pod.uid):
            return
        meta = claim.get("metadata") or {}
        reserved = [{"$patch": "delete", "uid": pod.uid}]
        patch = {"metadata": {"uid": meta.get("uid")}, "status": {"reservedFor": reserved}}
        try:
            self.kube.patch(RESOURCE_CLAIMS, str(meta.get("name")), patch, meta.get("namespace"), "status")
        except ApiError as exc:
            log.warning("unreserve", extra={"resourceclaim": object_key(claim), "error": exc.message})

    def _delete(self, claim: JSON) -> None:
        """deleteClaim: the delete-protection finalizer removed with an Update (a 409 reads the claim again, as
        RetryOnConflict), then the claim deleted; failures logged, as upstream logs them."""
        meta = claim.get("metadata") or {}
        name, namespace = str(meta.get("name")), meta.get("namespace")
        current = copy.deepcopy(claim)
        try:
            for attempt in range(RETRY_STEPS):
                if attempt:
                    self.sleep(RETRY_SECONDS)
                    current = self.kube.get(RESOURCE_CLAIMS, name, namespace)
                finalizers = (current.get("metadata") or {}).get("finalizers") or []
                if model.FINALIZER not in finalizers:
                    break
                current["metadata"]["finalizers"] = [f for f in finalizers if f != model.FINALIZER]
                try:
                    self._put(current, None, f"update resourceclaim {namespace}/{name}")
                    break
                except _Conflict:
                    if attempt == RETRY_STEPS - 1:
                        raise
            self.kube.delete(RESOURCE_CLAIMS, name, namespace)
        except (ApiError, ClaimWriteError, _Conflict) as exc:
            if getattr(exc, "status", 0) != 404:
                log.warning("delete", extra={"resourceclaim": f"{namespace}/{name}", "error": str(exc)})

    def _put(self, claim: JSON, sub: str | None, context: str) -> JSON:
        meta = claim["metadata"]
        path = RESOURCE_CLAIMS.path(meta.get("namespace"), meta.get("name"), sub)
        try:
            return self.kube.request("PUT", path, body=claim)
        except ApiError as exc:
            if exc.status == 409:
                raise _Conflict(f"{context}: {exc.message}") from None
            raise ClaimWriteError(f"{context}: {exc.message}") from None


class _Conflict(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------------------- the live loop


@dataclass(frozen=True)
class ClaimWrite:
    """One claim PreBind must write for a decided pod (the allocation None: reserve an allocated claim).
    ``mappings`` set: the pod's extended-resource claim, created first, then named in the pod's status with them."""

    claim: model.ResourceClaim
    allocation: model.AllocationResult | None
    mappings: tuple[Mapping[str, str], ...] | None = None

    @property
    def creates(self) -> bool:
        return self.mappings is not None


class DeferredClaimWriter:
    """The ``writer`` a live scheduler gives the session's DRA state (``cluster.dra.writer``, called by
    DynamicResources' PreBind as ``writer(pod, node, claim, allocation or None, consumer)``): the writes are recorded
    by pod uid and done in the binding cycle (``take`` them into the decision; ``ClaimWriter`` writes them). It never
    refuses, so the in-memory PreBind goes on; a failed write undoes the reservation in the live loop."""

    def __init__(self) -> None:
        self.pending: dict[str, list[ClaimWrite]] = {}
        self._creating: dict[tuple[str, str], tuple[Mapping[str, str], ...]] = {}

    def __call__(
        self, pod: Any, node: str, claim: model.ResourceClaim, allocation: model.AllocationResult | None, consumer: Any
    ) -> str | None:
        mappings = self._creating.pop((pod.uid, claim.key), None)
        self.pending.setdefault(pod.uid, []).append(ClaimWrite(claim, allocation, mappings))
        return None

    def create_claim(
        self, pod: Any, node: str, claim: model.ResourceClaim, mappings: Iterable[Mapping[str, str]]
    ) -> str | None:
        """The pod's extended-resource claim is to be created: its write (the next call for it) creates it first."""
        self._creating[(pod.uid, claim.key)] = tuple(dict(m) for m in mappings)
        return None

    def take(self, uid: str) -> tuple[ClaimWrite, ...]:
        for key in [k for k in self._creating if k[0] == uid]:
            del self._creating[key]
        return tuple(self.pending.pop(uid, ()))


def apply_claims(cluster: Any, docs: Mapping[str, JSON | None], source: str) -> tuple[int, str]:
    """Claims changed in the cache (key -> the object, None when deleted) taken into the session's DRA state in
    place; (how many, '') or (0, why the session must be rebuilt instead)."""
    state = dra_state(cluster)
    if state is None:
        return (0, "a ResourceClaim appeared") if any(d is not None for d in docs.values()) else (0, "")
    from accelsched.dra.objects import parse_resource_claim
    from accelsched.live.convert import UNUSABLE, unusable_message

    for key, doc in docs.items():
        claim = None
        if doc is not None:
            try:
                claim = parse_resource_claim(doc, source)
            except UNUSABLE as exc:  # left out, as a rebuild leaves it out
                log.warning("object left out", extra={"object": f"ResourceClaim {key}", "error": unusable_message(exc)})
        state.update_claim(key, claim)
    return len(docs), ""


def forget_pods(cluster: Any, keys: Iterable[str]) -> None:
    """Pods whose claims must be resolved again (the resourceclaim controller wrote their claim names)."""
    state = dra_state(cluster)
    for key in keys if state is not None else ():
        state.forget_pod(key)


def write_claims(writer: ClaimWriter, writes: Iterable[ClaimWrite], pod: Any) -> tuple[list[JSON], str | None]:
    """A decided pod's claim writes, in order, up to the first failure: the claims written or created (as the API
    returned them, for Unreserve) and that failure's message (the pod must not be bound), or None."""
    written: list[JSON] = []
    for w in writes:
        try:
            current = None
            if w.creates:
                current = writer.create(w.claim)
                written.append(current)  # Unreserve deletes it, whatever fails next
            doc = writer.write_allocation(w.claim, w.allocation, pod, current)
            if not w.creates:
                written.append(doc)
                continue
            written[-1] = doc
            writer.extended_status(pod, doc, w.mappings or ())
        except ClaimWriteError as exc:
            return written, f'running PreBind plugin "DynamicResources": {exc}'
    return written, None


def unreserve_claims(writer: ClaimWriter, claims: Iterable[JSON], pod: Any) -> None:
    """DynamicResources' Unreserve for claims PreBind wrote (the pod was not bound after all)."""
    for claim in claims:
        writer.unreserve(claim, pod)


class AssumedClaims:
    """Claims we allocated or reserved whose write the informer does not show yet (kube-scheduler's assume cache
    for claims): claim key -> (claim uid, pod uid, the status we write). ``overlay`` shows a claim from the cache as
    it will be once written; an entry goes when the cache shows the reservation, the claim is gone, or the write
    failed (``forget``)."""

    def __init__(self) -> None:
        self.claims: dict[str, list[tuple[str, Any, ClaimWrite]]] = {}

    def assume(self, pod: Any, writes: Iterable[ClaimWrite]) -> None:
        """A claim we create is matched by key alone: its uid is the API server's, not known yet ("")."""
        for w in writes:
            self.claims.setdefault(w.claim.key, []).append(("" if w.creates else w.claim.uid, pod, w))

    def forget(self, pod_uid: str) -> None:
        for key in list(self.claims):
            self.claims[key] = [e for e in self.claims[key] if e[1].uid != pod_uid]
            if not self.claims[key]:
                del self.claims[key]

    def observed(self, key: str, doc: JSON | None) -> None:
        """A claim event: drop what the cache now shows written (or what can no longer be)."""
        entries = self.claims.get(key)
        if not entries:
            return
        uid = str(((doc or {}).get("metadata") or {}).get("uid") or "")
        kept = [e for e in entries if doc is not None and e[0] in ("", uid) and not reserved_for_pod(doc, e[1].uid)]
        if kept:
            self.claims[key] = kept
        else:
            del self.claims[key]

    def unseen(self, store: Mapping[str, JSON]) -> list[JSON]:
        """Claims we are creating that ``store`` (the cache) does not show yet, as they will be once written: a
        rebuild meanwhile must see their devices taken, as the session it replaces did."""
        out = []
        for key, entries in self.claims.items():
            w = next((e[2] for e in entries if e[2].creates), None)
            if w is not None and key not in store:
                out.append(self.overlay(key, copy.deepcopy(w.claim.raw)))
        return out

    def overlay(self, key: str, doc: JSON) -> JSON:
        """``doc`` with our writes in flight applied: allocation, finalizer and reservations."""
        entries = self.claims.get(key)
        uid = str((doc.get("metadata") or {}).get("uid") or "")
        entries = [e for e in entries or () if e[0] in ("", uid) and not reserved_for_pod(doc, e[1].uid)]
        if not entries:
            return doc
        out = {**doc, "metadata": dict(doc.get("metadata") or {}), "status": dict(doc.get("status") or {})}
        for _uid, pod, w in entries:
            if w.allocation is not None and not out["status"].get("allocation"):
                out["status"]["allocation"] = to_api_allocation(w.allocation, timestamp())
                finalizers = list(out["metadata"].get("finalizers") or [])
                if model.FINALIZER not in finalizers:
                    out["metadata"]["finalizers"] = [*finalizers, model.FINALIZER]
            out["status"]["reservedFor"] = [*(out["status"].get("reservedFor") or []), consumer_reference(pod)]
        return out
