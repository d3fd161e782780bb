"""The informers' list in pages (limit and continue, as client-go's pager) against the real API server: the same
objects as one list, trimmed as they come, and a whole list again when a continue token has expired."""

from __future__ import annotations

from conftest import KubeContext
from livekit import accel_pod, kube_for

from accelsched.live import kube as k
from accelsched.live.kube import ApiError
from accelsched.live.trim import trim


def names(out: dict) -> list[str]:
    return sorted(item["metadata"]["name"] for item in out["items"])


def test_a_list_in_pages_is_the_list_and_each_item_is_trimmed(kube: KubeContext) -> None:
    api = kube_for(kube.kubeconfig)
    for i in range(7):
        api.create(k.PODS, accel_pod(f"page-{i}", kube.namespace), kube.namespace)
    whole = api.list(k.PODS, kube.namespace)
    paged = api.list(k.PODS, kube.namespace, page_size=2, transform=trim)
    assert names(paged) == names(whole) and len(whole["items"]) == 7
    assert all("managedFields" in item["metadata"] for item in whole["items"])  # what the server sends
    assert not any("managedFields" in item["metadata"] for item in paged["items"])
    assert paged["metadata"]["resourceVersion"]  # the snapshot's version, where the watch resumes


def test_an_expired_continue_token_lists_again_in_one_request(kube: KubeContext) -> None:
    """A page whose continue token etcd has compacted away is answered 410 Gone ("The provided continue parameter is
    too old", seen listing 6,000 pods on a loaded machine against this control plane's 5-second compaction); the
    list starts over in one request. The server's answer to the second page is replaced by that 410 here: when it
    comes depends on the compaction's timing and the watch cache, too slow and flaky to wait for in a test."""
    api = kube_for(kube.kubeconfig)
    for i in range(3):
        api.create(k.PODS, accel_pod(f"slow-{i}", kube.namespace), kube.namespace)
    requests: list[dict] = []
    request = api.request

    def expiring(method: str, path: str, query: dict | None = None, **kw: object) -> object:
        if method == "GET" and path == k.PODS.path(kube.namespace):
            requests.append(dict(query or {}))
            if (query or {}).get("continue") and len(requests) == 2:
                raise ApiError(410, "The provided continue parameter is too old to display a consistent list result.")
        return request(method, path, query, **kw)

    api.request = expiring  # type: ignore[method-assign]
    out = api.list(k.PODS, kube.namespace, page_size=1, transform=trim)
    assert names(out) == ["slow-0", "slow-1", "slow-2"]  # once each: the first page's item is not kept twice
    assert [q["limit"] for q in requests] == [1, 1, None]  # a page, the expired page, then the whole list
    assert not any("managedFields" in item["metadata"] for item in out["items"])
