"""The Workloads' timeline of one run of Kueue's performance harness (``python -m benchmarks.kueueperf --timeline``).

Kueue's runner reports averages (time to admission per class, usage, evictions), which say how a system did but not
why. This watches the Workloads on the same API server while the runner drives them, and keeps for each one when
it was created, each time it was admitted, evicted and finished, as the API server's watch delivered them (the
runner's informer sees the same events): ``timeline.jsonl`` in the system's run directory. ``summary`` reads it back
into what explains the averages: how long the first admission took per class (the system's latency, apart from
any wait for quota), how long a readmission took after an eviction, when the evictions came, and how long a
finished Workload's quota took to be used again (the time from a Workload's finish to the next admission in its
ClusterQueue).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"  # the generator's ClassLabel (runner/generator)


def _state(obj: dict[str, Any]) -> dict[str, Any]:
    """The flags the summary follows (admitted, evicted, finished), the Preempted reason (why it was evicted) and
    the QuotaReserved message (a waiting one's), cut short."""
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    state: dict[str, Any] = {
        k: (conditions.get(t) or {}).get("status") == "True"
        for k, t in (("a", "Admitted"), ("e", "Evicted"), ("f", "Finished"))
    }
    state["why"] = (conditions.get("Preempted") or {}).get("reason", "")
    state["msg"] = str((conditions.get("QuotaReserved") or {}).get("message", ""))[:60]
    return state


class Recorder:
    """A thread watching every Workload from the start of the run, a line per event in ``path``."""

    def __init__(self, kubeconfig: Path, path: Path) -> None:
        self.kubeconfig, self.path = kubeconfig, path
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kueue-timeline", daemon=True)
        self._response: Any = None

    def start(self) -> Recorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self._response is not None:
            self._response.shutdown()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from accelsched.live import kube as k
        from accelsched.live import kueue as live_kueue

        kube = k.Kube(k.api_client(str(self.kubeconfig)))
        resource = live_kueue.RESOURCES["Workload"]
        version = "0"
        with self.path.open("w") as out:
            while not self.stopped.is_set():
                try:
                    opened = lambda r: setattr(self, "_response", r)  # noqa: E731
                    for event in kube.watch(resource, version, timeout_seconds=60, opened=opened):
                        obj = event.get("object") or {}
                        meta = obj.get("metadata") or {}
                        version = meta.get("resourceVersion") or version
                        if event.get("type") not in ("ADDED", "MODIFIED"):
                            continue
                        line = {"t": time.time(), "ns": meta.get("namespace"), "name": meta.get("name"),
                                "class": (meta.get("labels") or {}).get(CLASS_LABEL, ""),
                                "created": meta.get("creationTimestamp"), **_state(obj)}  # fmt: skip
                        out.write(json.dumps(line) + "\n")
                except Exception:  # the server going away at the end of the run, or a dropped watch: retry
                    if self.stopped.wait(0.5):
                        return


def _quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    v = sorted(values)
    p50, p90 = v[len(v) // 2], v[int(len(v) * 0.9)]
    return f"n={len(v)} avg={sum(v) / len(v):.2f} p50={p50:.2f} p90={p90:.2f} max={v[-1]:.2f}"


def summary(lines: Iterable[str]) -> str:
    """What the timeline says (see the module docstring), as text."""
    events = [json.loads(line) for line in lines if line.strip()]
    if not events:
        return "timeline: no events"
    first_seen: dict[str, float] = {}
    last: dict[str, dict[str, bool]] = {}
    cls: dict[str, str] = {}
    first_admit: dict[str, list[float]] = {}
    readmit: dict[str, list[float]] = {}
    evictions_at: list[float] = []
    evicted_since: dict[str, float] = {}
    finished_at: dict[str, list[float]] = {}  # namespace (= ClusterQueue in the harness) -> finish times waiting
    reuse: list[float] = []
    reasons: dict[str, int] = {}
    start = min(e["t"] for e in events)
    for e in events:
        key = f"{e['ns']}/{e['name']}"
        first_seen.setdefault(key, e["t"])
        cls[key] = e["class"]
        before = last.get(key, {"a": False, "e": False, "f": False})
        if e["a"] and not before["a"]:
            if key in evicted_since:
                readmit.setdefault(e["class"], []).append(e["t"] - evicted_since.pop(key))
            else:
                first_admit.setdefault(e["class"], []).append(e["t"] - first_seen[key])
            waiting = finished_at.get(e["ns"])
            if waiting:
                reuse.append(e["t"] - waiting.pop(0))
        if e["e"] and not before["e"]:
            evictions_at.append(e["t"] - start)
            reasons[f"{e['class']} {e.get('why', '')}"] = reasons.get(f"{e['class']} {e.get('why', '')}", 0) + 1
            evicted_since[key] = e["t"]
        if e["f"] and not before["f"]:
            finished_at.setdefault(e["ns"], []).append(e["t"])
        last[key] = e
    out = [f"timeline: {len(first_seen)} Workloads, {len(events)} events over {events[-1]['t'] - start:.1f} s"]
    for c in sorted(first_admit):
        out.append(f"  first admission after creation, {c} (s): {_quantiles(first_admit[c])}")
    for c in sorted(readmit):
        out.append(f"  readmission after eviction, {c} (s): {_quantiles(readmit[c])}")
    buckets: dict[int, int] = {}
    for t in evictions_at:
        buckets[int(t)] = buckets.get(int(t), 0) + 1
    out.append(f"  evictions: {len(evictions_at)}; by second: {dict(sorted(buckets.items()))}")
    out.append(f"  evictions by class and Preempted reason: {dict(sorted(reasons.items()))}")
    out.append(f"  finish to the next admission in its ClusterQueue (s): {_quantiles(reuse)}")
    return "\n".join(out)


def api_requests(kubeconfig: Path) -> str:
    """The API server's request counts and time spent per verb, resource and subresource since it started (its
    ``apiserver_request_total`` and ``apiserver_request_duration_seconds_sum``): on these machines the API server is
    the busiest process of a run, so what each system asks of it explains much of the difference."""
    from accelsched.live import kube as k

    text = k.Kube(k.api_client(str(kubeconfig))).request("GET", "/metrics", parse=lambda body: body)
    counts: dict[tuple[str, str, str], float] = {}
    seconds: dict[tuple[str, str, str], float] = {}
    for line in str(text).splitlines():
        name, _, rest = line.partition("{")
        if name not in ("apiserver_request_total", "apiserver_request_duration_seconds_sum"):
            continue
        labels_text, _, value = rest.rpartition("} ")
        labels = dict(part.split("=", 1) for part in labels_text.replace('"', "").split(",") if "=" in part)
        if labels.get("group") not in ("kueue.x-k8s.io", "") or labels.get("verb") in ("WATCH", "CONNECT"):
            continue
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
        into = counts if name == "apiserver_request_total" else seconds
        into[key] = into.get(key, 0.0) + float(value)
    rows = sorted(counts.items(), key=lambda item: -item[1])
    out = ["  API server requests (verb resource/subresource: count, seconds in the server):"]
    out += [
        f"    {v} {r}{'/' + sub if sub else ''}: {int(n)}, {seconds.get((v, r, sub), 0):.1f} s"
        for (v, r, sub), n in rows
        if n >= 10
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import sys

    for name in argv if argv is not None else sys.argv[1:]:
        print(f"{name}:\n{summary(Path(name).read_text().splitlines())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
