"""``python -m benchmarks.ui``: the ``accelsched ui`` page in a real browser, at the lab's size, 1,000 and 5,000 nodes.

    python -m benchmarks.ui                          # lab, 1000 and 5000 nodes (8 accelerators each)
    python -m benchmarks.ui --sizes lab              # the smoke test's size (seconds)
    python -m benchmarks.ui --sizes 5000 --update publish --json out/ui.json
    python -m benchmarks.ui --sizes 5000b --update publish   # 5,000 nodes nearly full, 1,732 Pending (a backlog)

Each size runs the real server (uvicorn on loopback, a free port) over a Hub and opens the page in Debian's
Chromium (headless, through Playwright). Figures, all measured in the browser except the server's own:

- first render: navigation start -> ``body[data-version]`` set and the map's first node rows in the DOM, then the
  next animation frame (drawn); the median of ``--repeat`` fresh page loads;
- update after a bind: a pending pod bound to a node in view -> the node's cell names the pod, next frame. With a
  control plane built (hack/build-controlplane.sh; tests/live/controlplane.py finds it) the 1,000- and 5,000-node
  sizes run live: nodes and pods are created in the API server (threads), the UI follows it through watches
  (accelsched/ui/live.py) and the bind is a real POST pods/binding. Without one, and always for the lab (whose
  topology, MIG and DRA objects a bare API server would not expand), the bind is a new state with the pod's
  nodeName set, published to the Hub (what the live source does after its watch): the table says which;
- scroll: the map scrolled to 10/25/50/75/90 % -> the new rows drawn (median and max of the five);
- explain and what-if: GET /api/explain for three Pending pods, and POST /api/whatif cordoning, draining and adding
  a copy of one node (three nodes each, gzip asked for as the page does), each timed from request to parsed answer
  over loopback (the server's engine, JSON and gzip included); the median of the three, and the what-ifs' max,
  before the page is loaded; and the same nine what-ifs through Hub.whatif in the process (the page's delta answer,
  JSON-encoded, no HTTP), wall and CPU;
- server RSS: the resident memory of this process (the server's thread, its Hub and the generated cluster) once the
  size's state is served;
- server: Hub.last_run_seconds of the first publish (the engine's run over the state + the view), and the size of
  GET /api/state raw and gzip-compressed as the page receives it; DOM elements: how many the page holds (the map
  draws only the rows in view).

Speed never fails the command; a page that does not render, or a bind it never shows, does (exit 1).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for extra in (REPO / "tests" / "live", REPO / "tests" / "ui"):  # the control plane and browser helpers
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import browserkit  # noqa: E402

from accelsched.api import reader  # noqa: E402
from accelsched.ui.hub import Hub  # noqa: E402
from accelsched.ui.state import DemoState, FilesState, RawState, clone, object_key  # noqa: E402

ACCEL = "qualcomm.com/ai-accelerator"
DEVICES_PER_NODE = 8
SIZES = ("lab", "1000", "5000")
SCROLL_POINTS = (0.1, 0.25, 0.5, 0.75, 0.9)

# Records when the page first has its version attribute and node rows (performance.now(): ms since navigation
# start), and the next animation frame after that (the frame that draws them).
FIRST_RENDER_PROBE = """
(() => {
  const done = () => {
    const b = document.body;
    return b && b.dataset.version && document.querySelector('#map .node-row[data-node]');
  };
  const obs = new MutationObserver(() => {
    if (!done()) return;
    obs.disconnect();
    const dom = performance.now();
    requestAnimationFrame(() => { window.__firstRender = {dom, drawn: performance.now()}; });
  });
  obs.observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ['data-version']});
})();
"""

# Installed before a bind: resolves window.__seenAt (Date.now(), the wall clock Python shares) at the animation
# frame after the node's cell first names the pod.
BIND_WATCH = """
([node, key]) => {
  window.__seenAt = null;
  const shown = () => [...document.querySelectorAll(`#map .cell[data-device^="${node}/"]`)].some(c =>
      c.getAttribute('data-holder') === key || (c.getAttribute('data-holders') || '').split(' ').includes(key));
  const obs = new MutationObserver(() => {
    if (!shown()) return;
    obs.disconnect();
    requestAnimationFrame(() => { window.__seenAt = Date.now(); });
  });
  obs.observe(document.querySelector('#map'), {subtree: true, childList: true, attributes: true});
}
"""

SCROLL = """
async (frac) => {
  const map = document.querySelector('#map');
  const sc = map.scrollHeight > map.clientHeight + 1 ? map : document.scrollingElement;
  const names = () => [...map.querySelectorAll('.node-row[data-node]')].map(r => r.dataset.node).join(' ');
  const inView = () => {
    const box = sc === document.scrollingElement ? {top: 0, bottom: innerHeight} : sc.getBoundingClientRect();
    return [...map.querySelectorAll('.node-row[data-node]')].some(r => {
      const b = r.getBoundingClientRect();
      return b.bottom > box.top && b.top < box.bottom;
    });
  };
  const t = performance.now();
  sc.scrollTop = Math.floor((sc.scrollHeight - sc.clientHeight) * frac);
  for (let i = 0; i < 600; i++) {
    await new Promise(r => requestAnimationFrame(r));
    if (inView()) return {ms: performance.now() - t, rows: names().split(' ').length};
  }
  return {ms: null, rows: 0};
}
"""


@dataclass
class Cluster:
    """A generated cluster as raw objects: what is created in the API server, or written as one file."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]


def node_obj(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", ACCEL: str(DEVICES_PER_NODE)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "accelsched.io/pdu": f"pdu-{i // 8:04d}",
                "accelsched.io/rack": f"rack-{i // 32:03d}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "node.kubernetes.io/instance-type": "qaic-ai100-x8",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_obj(
    name: str, namespace: str, devices: int, node: str = "", cpu: str = "4", selector: dict[str, str] | None = None
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "16Gi", **({ACCEL: str(devices)} if devices else {})}
    limits = {ACCEL: str(devices)} if devices else {}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/train:1",
                "resources": {"requests": requests, **({"limits": limits} if limits else {})},
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name.rsplit("-", 1)[0]}},
        "spec": spec,
    }


def generate(n: int, namespace: str = "bench") -> Cluster:
    """``n`` nodes of 8 accelerators: by node index mod 4 one 8-card job, a 4-card one, two 2-card ones, or
    nothing (about 56% of the cards held), a cpu-only pod on every fifth node; pending: one pod per 20 nodes of 1,
    2, 4 or 8 cards (the run places them), one per 200 nodes asking 16 cards (never fits: a long Pending message),
    and one per 100 nodes for a node pool no node has yet (Pending on its nodeSelector: the pods a bind is
    measured with, as an operator or another scheduler binds them)."""
    nodes = [node_obj(i) for i in range(n)]
    pods: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        name = node["metadata"]["name"]
        shape = {0: [8], 1: [4], 2: [2, 2], 3: []}[i % 4]
        for j, size in enumerate(shape):
            pods.append(pod_obj(f"job{size}-{i:05d}-{j}", namespace, size, name))
        if i % 5 == 0:
            pods.append(pod_obj(f"agent-{i:05d}", namespace, 0, name, cpu="500m"))
    for k in range(max(1, n // 20)):
        pods.append(pod_obj(f"wait{(1, 2, 4, 8)[k % 4]}-{k:05d}", namespace, (1, 2, 4, 8)[k % 4]))
    for k in range(max(1, n // 200)):
        pods.append(pod_obj(f"huge-{k:05d}", namespace, 16))
    for k in range(max(1, n // 100)):
        pods.append(pod_obj(f"reserved-{k:05d}", namespace, 1, selector={"accelsched.io/pool": "reserved"}))
    return Cluster(nodes, pods)


def generate_backlog(n: int, namespace: str = "bench") -> Cluster:
    """The shape issue 27 was measured on, with a backlog: ``n`` nodes of 8 accelerators each held to 7 (by node
    index mod 4: 4+2+1, 2+2+2+1, 4+1+1+1 or seven 1-card pods, in 21 namespaces), so about 4.5 bound pods per
    node, and 1,732 Pending pods per 5,000 nodes asking 2, 4 or 8 cards in 50 apps: none fits (a card free per
    node), each goes through PostFilter. The same 1/200 of pods for a node pool no node has yet as ``generate``'s,
    for the bind."""
    nodes = [node_obj(i) for i in range(n)]
    pods: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        name = node["metadata"]["name"]
        shape = {0: [4, 2, 1], 1: [2, 2, 2, 1], 2: [4, 1, 1, 1], 3: [1] * 7}[i % 4]
        for j, size in enumerate(shape):
            pods.append(pod_obj(f"job{size}-{i:05d}-{j}", namespace, size, name))
    for k in range(max(1, n * 1732 // 5000)):
        pods.append(pod_obj(f"q{k % 50:02d}-{k:05d}", namespace, (2, 4, 8, 2)[k % 4]))
    for k in range(max(1, n // 100)):
        pods.append(pod_obj(f"reserved-{k:05d}", namespace, 1, selector={"accelsched.io/pool": "reserved"}))
    return Cluster(nodes, pods)


def files_state(cluster: Cluster, workdir: Path) -> FilesState:
    path = workdir / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*cluster.nodes, *cluster.pods]}))
    return FilesState.load([path])


# -- the live cluster ----------------------------------------------------------------------------------------------


class LiveCluster:
    """etcd + kube-apiserver started here, filled with a generated cluster, and the UI's live source over it."""

    def __init__(self, workdir: Path) -> None:
        from controlplane import ControlPlane

        self.cp = ControlPlane(workdir / "controlplane").start()
        from accelsched.live.kube import Kube, api_client

        self.kube = Kube(api_client(str(self.cp.kubeconfig), pool_size=48))
        self.source: Any = None

    def fill(self, cluster: Cluster, namespace: str, workers: int = 32) -> float:
        from accelsched.live import kube as k

        began = time.perf_counter()
        self.kube.create(k.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        self.kube.create(k.Resource("/api/v1", "serviceaccounts"), sa, namespace)

        def node(body: dict[str, Any]) -> None:
            created = {key: v for key, v in body.items() if key != "status"}
            self.kube.create(k.NODES, created)
            self.kube.patch(k.NODES, body["metadata"]["name"], {"status": body["status"]}, sub="status")
            # the node lifecycle controller's part: a Ready node loses the not-ready taint admission gave it
            self.kube.patch(k.NODES, body["metadata"]["name"], {"spec": {"taints": []}})

        def pod(body: dict[str, Any]) -> None:
            self.kube.create(k.PODS, body, namespace)

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(node, cluster.nodes))
            list(pool.map(pod, cluster.pods))
        return time.perf_counter() - began

    def hub(self, timeout: float = 300.0) -> Hub:
        from accelsched.live.kube import api_client
        from accelsched.ui.live import LiveSource, ReadOnlyKube

        self.source = LiveSource(ReadOnlyKube(api_client(str(self.cp.kubeconfig))))
        hub = Hub(self.source.start(timeout))
        self.source.follow(hub)
        # the creations' last watch events may still be arriving: measure once the view has settled
        settled, last = time.monotonic(), hub.version
        deadline = settled + timeout
        while time.monotonic() - settled < 1.0 and time.monotonic() < deadline:
            time.sleep(0.1)
            if hub.version != last:
                settled, last = time.monotonic(), hub.version
        return hub

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.kube.bind(namespace, name, node)

    def reset(self, namespace: str) -> None:
        from accelsched.live import kube as k

        if self.source is not None:
            self.source.stop()
            self.source = None
        self.kube.request("DELETE", k.PODS.path(namespace), {"gracePeriodSeconds": 0})
        self.kube.request("DELETE", k.NODES.path())

    def stop(self) -> None:
        if self.source is not None:
            self.source.stop()
        self.cp.stop()


def control_plane_available() -> bool:
    from controlplane import find_binaries

    return find_binaries() is not None


# -- measuring -------------------------------------------------------------------------------------------------


def get_state(url: str) -> tuple[dict[str, Any], int, int]:
    """The view as the page gets it: (body, raw bytes, gzip bytes on the wire)."""
    req = urllib.request.Request(url + "api/state", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=120) as r:
        wire = r.read()
        encoded = r.headers.get("Content-Encoding") == "gzip"
    raw = gzip.decompress(wire) if encoded else wire
    return json.loads(raw), len(raw), len(wire) if encoded else len(gzip.compress(raw))


def rss_mib() -> float | None:
    """This process's resident memory (the server runs here, in a thread; Chromium is a process of its own), from
    /proc (Linux); None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def timed(request: urllib.request.Request | str) -> float:
    """Milliseconds from sending ``request`` to its parsed JSON answer (which must be a 200)."""
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        data = response.read()
        json.loads(gzip.decompress(data) if response.headers.get("Content-Encoding") == "gzip" else data)
    return (time.perf_counter() - began) * 1000


def measure_engine(url: str, view: dict[str, Any]) -> dict[str, Any]:
    """explain of three Pending pods and a one-node cordon what-if on three nodes, over HTTP: medians in ms."""
    keys = []
    for entry in view["pending"]:
        keys.append(entry["members"][0]["key"] if entry["kind"] == "gang" else entry["key"])
    picks = list(dict.fromkeys([keys[0], keys[len(keys) // 2], keys[-1]])) if keys else []
    explain = [timed(f"{url}api/explain?pod={urllib.parse.quote(k)}") for k in picks]
    out: dict[str, Any] = {"explain_ms": round(statistics.median(explain), 1) if explain else None}
    for op, bodies in whatif_bodies(view["order"]).items():
        ms = [
            timed(urllib.request.Request(f"{url}api/whatif", json.dumps(b).encode(), WHATIF_HEADERS, method="POST"))
            for b in bodies
        ]
        out[f"whatif_{op}_ms"] = round(statistics.median(ms), 1)
        out[f"whatif_{op}_ms_max"] = round(max(ms), 1)
    out["whatif_ms"] = out.get("whatif_cordon_ms")
    return out


WHATIF_HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "gzip"}  # as the page asks


def whatif_bodies(order: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The one-node what-ifs measured: cordon, drain, and add a copy, each of three nodes (a third of the way
    apart in the map's order, so no two share a rack)."""
    picks = list(dict.fromkeys(order[(len(order) * k) // 3] for k in range(3))) if order else []
    return {
        "cordon": [{"actions": [{"op": "cordon", "nodes": [n]}]} for n in picks],
        "drain": [{"actions": [{"op": "drain", "nodes": [n]}]} for n in picks],
        "add": [{"actions": [{"op": "add", "node": n, "count": 1}]} for n in picks],
    }


def measure_whatif_server(hub: Hub, order: list[str]) -> dict[str, Any]:
    """The same what-ifs in the server's process (Hub.whatif with the page's delta answer, its JSON encoded, no
    HTTP): wall and CPU ms (median and max over the nine). The CPU time is the process's: the server is idle."""
    from accelsched.ui.server import json_response

    wall, cpu = [], []
    for bodies in whatif_bodies(order).values():
        for body in bodies:
            began, began_cpu = time.perf_counter(), time.process_time()
            json_response(hub.whatif(body, delta=True))
            wall.append((time.perf_counter() - began) * 1000)
            cpu.append((time.process_time() - began_cpu) * 1000)
    if not wall:
        return {}
    return {
        "whatif_server_ms": round(statistics.median(wall), 1),
        "whatif_server_ms_max": round(max(wall), 1),
        "whatif_server_cpu_ms": round(statistics.median(cpu), 1),
        "whatif_server_cpu_ms_max": round(max(cpu), 1),
    }


def first_render(browser: Any, url: str, repeat: int) -> tuple[list[float], Any, Any]:
    """Fresh page loads; the last page stays open for the next measurements. (times ms, context, page)"""
    times: list[float] = []
    context = page = None
    for i in range(repeat):
        if context is not None:
            context.close()
        context = browser.new_context(viewport=browserkit.VIEWPORT)
        page = context.new_page()
        page.set_default_timeout(180_000)
        page.add_init_script(FIRST_RENDER_PROBE)
        page.goto(url)
        page.wait_for_function("() => window.__firstRender", polling=50)
        times.append(page.evaluate("window.__firstRender.drawn"))
        if i == 0:
            page.wait_for_timeout(200)
    return times, context, page


def pick_bind(view: dict[str, Any]) -> tuple[str, str]:
    """A pending single pod asking for devices, and a schedulable node among the first rows of the map with that
    many free devices of each resource it asks for: (pod key, node)."""
    nodes = {n["name"]: n for n in view["nodes"]}
    first = [nodes[name] for name in view["order"][:12] if name in nodes]
    for entry in sorted(view["pending"], key=lambda e: e["devices"]):
        if entry["kind"] != "pod" or entry.get("status") != "Pending" or not entry["devices"]:
            continue
        wants = {res: int(qty) for res, qty in entry["requests"].items() if "/" in res}
        if not wants:
            continue
        for node in first:
            free = node.get("free") or {}
            if not node.get("unschedulable") and all(int(free.get(res, 0)) >= n for res, n in wants.items()):
                return entry["key"], node["name"]
    raise RuntimeError("no pending pod fits a node in view: cannot measure an update after a bind")


def bound_state(state: RawState, key: str, node: str) -> RawState:
    """``state`` with the pod ``key`` bound to ``node``: what the live source publishes after a bind."""
    pods = [clone(p) for p in state.pods()]
    for p in pods:
        if object_key(p) == key:
            p.setdefault("spec", {})["nodeName"] = node
            break
    else:
        raise RuntimeError(f"no pod {key} in the state")
    return state.replace([clone(n) for n in state.nodes()], pods)


def measure_bind(page: Any, key: str, node: str, bind: Any) -> float:
    page.evaluate("window.scrollTo(0, 0); const m = document.querySelector('#map'); if (m) m.scrollTop = 0;")
    page.wait_for_selector(f'#map .node-row[data-node="{node}"]')
    page.evaluate(BIND_WATCH, [node, key])
    began = time.time()
    bind()
    page.wait_for_function("() => window.__seenAt", polling=20, timeout=120_000)
    return page.evaluate("window.__seenAt") - began * 1000.0


def measure_size(browser: Any, size: str, args: argparse.Namespace, workdir: Path, live: LiveCluster | None) -> dict:
    from accelsched.ui.server import start_in_thread

    row: dict[str, Any] = {"size": size}
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    if size == "lab":
        state: RawState = DemoState.lab(None)
        mode = "publish"
        hub = Hub(state)
    else:
        cluster = generate_backlog(int(size[:-1]), namespace) if size.endswith("b") else generate(int(size), namespace)
        row["pods_generated"] = len(cluster.pods)
        if live is not None:
            row["fill_s"] = round(live.fill(cluster, namespace), 1)
            hub = live.hub()
            mode = "live"
        else:
            hub = Hub(files_state(cluster, workdir))
            mode = "publish"
    row["update_mode"] = mode
    row["publish_s"] = round(hub.last_run_seconds, 3)
    reader.freeze_heap()  # as `accelsched ui` does once its first run is served (ui/command.py)
    url, stop = start_in_thread(hub, "127.0.0.1", 0)
    url = url if url.endswith("/") else url + "/"
    context = None
    try:
        view, raw, wire = get_state(url)
        counts = view.get("counts") or {}
        row.update(
            nodes=len(view["nodes"]),
            devices=counts.get("devices"),
            pods=counts.get("pods"),
            pending=counts.get("pending"),
            json_kib=round(raw / 1024, 1),
            gzip_kib=round(wire / 1024, 1),
        )
        row.update(measure_engine(url, view))
        row.update(measure_whatif_server(hub, view["order"]))
        row["rss_mib"] = rss_mib()
        times, context, page = first_render(browser, url, args.repeat)
        row["first_render_ms"] = round(statistics.median(times), 1)
        row["first_render_ms_samples"] = [round(t, 1) for t in times]
        row["dom_elements"] = page.evaluate("document.querySelectorAll('*').length")
        row["rows_drawn"] = page.evaluate("document.querySelectorAll('#map .node-row').length")
        scrolls = [page.evaluate(SCROLL, frac) for frac in SCROLL_POINTS]
        if any(s["ms"] is None for s in scrolls) and len(view["nodes"]) > 30:
            raise RuntimeError("scrolling the map drew no new rows")
        ms = [s["ms"] for s in scrolls if s["ms"] is not None]
        row["scroll_ms_median"] = round(statistics.median(ms), 1) if ms else None
        row["scroll_ms_max"] = round(max(ms), 1) if ms else None

        key, node = pick_bind(view)
        row["bind"] = f"{key} -> {node}"
        version = hub.version
        if mode == "live":
            ns, name = key.split("/", 1)
            assert live is not None
            row["update_ms"] = round(measure_bind(page, key, node, lambda: live.bind(ns, name, node)), 1)
        else:
            new = bound_state(hub.state, key, node)
            row["update_ms"] = round(measure_bind(page, key, node, lambda: hub.publish(new)), 1)
        row["update_publish_s"] = round(hub.last_run_seconds, 3)
        if hub.version <= version:
            raise RuntimeError("the bind did not make a new version")
    finally:
        if context is not None:
            context.close()
        stop()
        if live is not None and size != "lab":
            live.reset(namespace)
    return row


def render(rows: list[dict[str, Any]], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=280)
    table = Table(title="accelsched ui in headless Chromium (ms measured in the browser)")
    for col in (
        "size",
        "nodes",
        "devices",
        "pods",
        "pending",
        "publish s",
        "/api/state KiB",
        "gzip KiB",
        "first render ms",
        "scroll ms (med/max)",
        "update after bind ms",
        "explain ms",
        "what-if ms cordon/drain/add (max)",
        "what-if in server ms (max) / CPU ms (max)",
        "server RSS MiB",
        "via",
        "DOM elements",
    ):
        table.add_column(col, justify="left" if col in ("size", "via") else "right", no_wrap=True)

    def fmt(v: Any, spec: str = "") -> str:
        return "-" if v is None else format(v, spec)

    for r in rows:
        if "error" in r:
            table.add_row(r["size"], *["-"] * 15, f"[red]{r['error'][:60]}[/]")
            continue
        table.add_row(
            r["size"],
            fmt(r["nodes"], ","),
            fmt(r["devices"], ","),
            fmt(r["pods"], ","),
            fmt(r["pending"], ","),
            fmt(r["publish_s"], ".2f"),
            fmt(r["json_kib"], ",.0f"),
            fmt(r["gzip_kib"], ",.0f"),
            fmt(r["first_render_ms"], ",.0f"),
            f"{fmt(r['scroll_ms_median'], '.0f')}/{fmt(r['scroll_ms_max'], '.0f')}",
            fmt(r["update_ms"], ",.0f"),
            fmt(r.get("explain_ms"), ",.0f"),
            "/".join(fmt(r.get(f"whatif_{op}_ms"), ",.0f") for op in ("cordon", "drain", "add"))
            + f" ({fmt(max(r.get(f'whatif_{op}_ms_max') or 0 for op in ('cordon', 'drain', 'add')), ',.0f')})",
            f"{fmt(r.get('whatif_server_ms'), ',.0f')} ({fmt(r.get('whatif_server_ms_max'), ',.0f')}) / "
            f"{fmt(r.get('whatif_server_cpu_ms'), ',.0f')} ({fmt(r.get('whatif_server_cpu_ms_max'), ',.0f')})",
            fmt(r.get("rss_mib"), ",.0f"),
            r["update_mode"] + (f" (fill {r['fill_s']} s)" if "fill_s" in r else ""),
            fmt(r["dom_elements"], ","),
        )
    console.print(table)
    console.print(
        "first render: navigation start -> body[data-version] and the first node rows, next frame (median of "
        "fresh loads). update: bind -> the node's cell names the pod, next frame; via live = a real POST "
        "pods/binding seen through the UI's watches, via publish = Hub.publish of the state with the pod bound. "
        "publish s: Hub.last_run_seconds (engine run + view) of the first state. explain / what-if: GET "
        "/api/explain of a Pending pod (median of 3); POST /api/whatif cordoning, draining, adding a copy of one node, "
        "request to parsed answer (median of 3 nodes each, and the max of the nine); in server: the same nine "
        "through Hub.whatif and its JSON in the process, wall and CPU.",
        style="dim",
        markup=False,
    )
    for note in notes:
        console.print(note, style="dim", markup=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ui", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help="comma-separated: lab and/or node counts (Nb: with a backlog)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="fresh page loads for the first render (median)")
    parser.add_argument(
        "--update",
        choices=("auto", "live", "publish"),
        default="auto",
        help="how the bind is made for node-count sizes (auto: live when a control plane is built)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s != "lab" and not s.removesuffix("b").isdigit():
            parser.error(f"--sizes: {s!r} is neither 'lab' nor a node count (N, or Nb: with a backlog)")
    why = browserkit.missing()
    if why:
        print(f"benchmarks.ui: {why}", file=sys.stderr)
        return 2
    notes: list[str] = []
    want_live = args.update in ("live", "auto") and any(s != "lab" for s in sizes)
    if want_live and not control_plane_available():
        if args.update == "live":
            print("benchmarks.ui: no control plane built (hack/build-controlplane.sh)", file=sys.stderr)
            return 2
        notes.append(
            "no control plane built (hack/build-controlplane.sh): the update after a bind is measured as "
            "Hub.publish of the state with one more bound pod"
        )
        want_live = False
    from playwright.sync_api import sync_playwright

    rows: list[dict[str, Any]] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="accelsched-ui-bench-") as tmp, sync_playwright() as pw:
        workdir = Path(tmp)
        live = LiveCluster(workdir) if want_live else None
        browser = browserkit.launch(pw)
        try:
            for size in sizes:
                print(f"benchmarks.ui: {size} ...", file=sys.stderr, flush=True)
                began = time.perf_counter()
                try:
                    row = measure_size(browser, size, args, workdir, live if size != "lab" else None)
                except Exception as exc:  # one size failing must still print the others
                    row = {"size": size, "error": f"{type(exc).__name__}: {exc}"}
                    failed = True
                row["elapsed_s"] = round(time.perf_counter() - began, 1)
                rows.append(row)
                print(f"benchmarks.ui: {size}: {json.dumps(row)}", file=sys.stderr, flush=True)
        finally:
            browser.close()
            if live is not None:
                live.stop()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    notes.append(f"machine: {machine}; Chromium {browserkit.CHROMIUM}")
    render(rows, notes)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": machine, "rows": rows, "notes": notes}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
