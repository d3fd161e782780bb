"""accelsched ui's server: the real Starlette app under uvicorn on 127.0.0.1 (a free port, in a thread), spoken to
over HTTP with the standard library, over the lab's nodes and a few pods; and the ``ui`` command's input checks."""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from accelsched.cli import main
from accelsched.ui import server
from accelsched.ui.hub import Hub
from accelsched.ui.state import FilesState

REPO = Path(__file__).resolve().parent.parent
NODES = REPO / "examples" / "lab" / "00-nodes.yaml"
ACCEL = "qualcomm.com/ai-accelerator"
PODS = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: small, namespace: team}
    spec:
      containers:
        - name: c
          resources: {limits: {qualcomm.com/ai-accelerator: "2"}, requests: {cpu: "1"}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: huge, namespace: team}
    spec:
      containers:
        - name: c
          resources: {limits: {qualcomm.com/ai-accelerator: "16"}, requests: {cpu: "1"}}
"""


class Served:
    def __init__(self, url: str, hub: Hub) -> None:
        self.url = url
        self.hub = hub
        self.port = int(url.rstrip("/").rsplit(":", 1)[1])

    def request(
        self, path: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url.rstrip("/") + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()

    def json(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        status, _, body = self.request(path, **kwargs)
        return status, json.loads(body)

    def raw(
        self, method: str, path: str, headers: dict[str, str], body: Any = None, chunked: bool = False, end: bool = True
    ) -> Any:
        """http.client, for what urllib will not send (a foreign Host, a chunked body; ``end=False`` leaves the chunked
        body open, so a server that answers early has nothing unread to reset the connection over)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        if chunked:
            for chunk in body:
                conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            if end:
                conn.send(b"0\r\n\r\n")
        elif body is not None:
            conn.send(body)
        resp = conn.getresponse()
        out = resp.status, json.loads(resp.read() or b"null")
        conn.close()
        return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pods = tmp_path_factory.mktemp("ui") / "pods.yaml"
    pods.write_text(PODS)
    hub = Hub(FilesState.load([NODES, pods]))
    url, stop = server.start_in_thread(hub)
    try:
        yield Served(url, hub)
    finally:
        stop()


def test_state_is_the_hubs_view_with_the_security_headers(served: Served) -> None:
    status, headers, body = served.request("/api/state")
    assert status == 200
    view = json.loads(body)
    assert view == served.hub.view()
    assert view["mode"] == "offline" and view["readOnly"] is True
    assert view["order"] == ["node-a", "node-b", "node-c", "node-d"]
    assert headers["content-type"] == "application/json"
    assert headers["content-security-policy"] == "default-src 'self'; img-src 'self' data:; style-src 'self'"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-store"


def test_since_must_be_a_version(served: Served) -> None:
    status, body = served.json("/api/state?since=abc")
    assert status == 400 and body["error"].startswith("since: ")


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/", "/api/state", "/api/whatif", "/static/app.js", "/nowhere"])
def test_write_verbs_are_refused_everywhere(served: Served, method: str, path: str) -> None:
    status, body = served.json(path, method=method, body=b"{}", headers={"Content-Type": "application/json"})
    assert status == 405
    assert body == {"error": f"accelsched ui is read-only: {method} is refused"}


@pytest.mark.parametrize("path", ["/", "/api/state", "/api/pod?key=team/small", "/api/events"])
def test_post_is_refused_but_on_whatif(served: Served, path: str) -> None:
    status, body = served.json(path, method="POST", body=b"{}", headers={"Content-Type": "application/json"})
    assert (status, body) == (405, {"error": "accelsched ui is read-only: POST is refused"})


def test_whatif_wants_json(served: Served) -> None:
    status, body = served.json("/api/whatif", method="POST", body=b'{"actions": []}', headers={})
    assert status == 415 and "application/json" in body["error"]
    status, body = served.json(
        "/api/whatif", method="POST", body=b'{"actions": []}', headers={"Content-Type": "text/plain"}
    )
    assert status == 415


def test_whatif_body_over_one_mebibyte_is_refused(served: Served) -> None:
    # A Content-Length over the limit is refused before the body is read. The test sends no body: one left unread
    # when the server closes would reset the connection before the client reads the answer (a flaky test, not a bug).
    headers = {"Host": f"127.0.0.1:{served.port}", "Content-Type": "application/json"}
    status, body = served.raw("POST", "/api/whatif", {**headers, "Content-Length": str((1 << 20) + 1)})
    assert status == 413 and "1048576" in body["error"]
    # Without a Content-Length (chunked), the limit holds while reading: 17 chunks of 64 KiB go past 1 MiB.
    chunks = [b"x" * 65536] * 17
    assert served.raw("POST", "/api/whatif", headers, chunks, chunked=True, end=False)[0] == 413


def test_bad_whatif_body_is_a_400_naming_the_field(served: Served) -> None:
    headers = {"Content-Type": "application/json"}
    status, body = served.json("/api/whatif", method="POST", body=b"{not json", headers=headers)
    assert status == 400 and body["error"].startswith("body: ")
    status, body = served.json("/api/whatif", method="POST", body=b"[1, 2]", headers=headers)
    assert status == 400 and body["error"].startswith("body: ")
    bad = json.dumps({"actions": [{"op": "cordon", "nodes": ["node-a"]}, {"op": "taint", "nodes": ["node-b"]}]})
    status, body = served.json("/api/whatif", method="POST", body=bad.encode(), headers=headers)
    assert status == 400, body
    assert "actions[1]" in body["error"]


def test_whatif_computes_and_changes_nothing(served: Served) -> None:
    before = served.hub.version
    body = json.dumps({"actions": [{"op": "cordon", "nodes": ["node-a", "node-b", "node-d"]}]}).encode()
    status, out = served.json("/api/whatif", method="POST", body=body, headers={"Content-Type": "application/json"})
    assert status == 200, out
    assert out["readOnly"] == "What-if only: nothing is written to the cluster."
    assert served.hub.version == before


def test_host_header_must_be_loopback_on_this_port(served: Served) -> None:
    for host in (f"127.0.0.1:{served.port}", f"localhost:{served.port}", "localhost"):
        assert served.raw("GET", "/api/state", {"Host": host})[0] == 200, host
    for host in ("evil.example", f"evil.example:{served.port}", f"127.0.0.1:{served.port + 1}", ""):
        status, body = served.raw("GET", "/api/state", {"Host": host})
        assert status == 421, host
        assert "loopback" in body["error"]


def test_a_cross_origin_whatif_is_refused(served: Served) -> None:
    headers = {"Host": f"127.0.0.1:{served.port}", "Content-Type": "application/json", "Origin": "http://evil.example"}
    body = b'{"actions": []}'
    status, out = served.raw("POST", "/api/whatif", {**headers, "Content-Length": str(len(body))}, body)
    assert status == 403 and "cross-origin" in out["error"]


def test_large_json_is_gzipped(served: Served) -> None:
    status, headers, body = served.request("/api/state", headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("content-encoding") == "gzip"
    assert json.loads(gzip.decompress(body)) == served.hub.view()


def test_pod_and_explain(served: Served) -> None:
    status, pod = served.json("/api/pod?key=team/small")
    assert status == 200 and pod["key"] == "team/small" and pod["node"]
    assert served.json("/api/pod?key=team/nobody") == (404, {"error": "no pod team/nobody"})
    assert served.json("/api/pod")[0] == 400
    status, explanation = served.json("/api/explain?pod=team/huge")
    assert status == 200 and explanation
    assert served.json("/api/explain?pod=team/nobody") == (404, {"error": "no pod team/nobody"})


def test_unknown_paths_and_no_sim_are_json_404s(served: Served) -> None:
    for path in ("/nowhere", "/api/nothing", "/api/sim", "/sim", "/static/../server.py", "/static/missing.js"):
        status, headers, body = served.request(path)
        assert status == 404, path
        assert headers["content-type"] == "application/json" and "error" in json.loads(body)


def test_events_stream_a_version_after_publish(served: Served) -> None:
    with urllib.request.urlopen(served.url + "api/events", timeout=10) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        assert stream.headers["Cache-Control"] == "no-store"

        def event() -> dict[str, Any]:
            lines = []
            while (line := stream.readline().decode()) != "\n":
                lines.append(line.strip())
            return dict(line.split(": ", 1) for line in lines if not line.startswith(":"))

        first = event()
        assert first["event"] == "version" and json.loads(first["data"]) == {"version": served.hub.version}
        started = time.monotonic()
        threading.Thread(target=lambda: served.hub.publish(served.hub.state)).start()
        second = event()
        assert time.monotonic() - started < 2.0
        assert second == {"event": "version", "data": json.dumps({"version": json.loads(first["data"])["version"] + 1})}
    # The delta from the previous version: the nodes whose etag changed (none: the same state again).
    status, delta = served.json(f"/api/state?since={served.hub.version - 1}")
    assert status == 200 and delta["nodes"] == []


def test_static_files_with_their_types_and_no_way_out(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
    (tmp_path / "app.js").write_text("export const x = 1;")
    (tmp_path / ".secret").write_text("no")
    hub = Hub(FilesState.load([NODES]))
    url, stop = server.start_in_thread(hub, static_dir=tmp_path)
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert resp.headers["Content-Type"] == "text/html; charset=utf-8" and b"doctype" in resp.read()
        with urllib.request.urlopen(url + "static/app.js", timeout=5) as resp:
            assert resp.headers["Content-Type"] == "text/javascript; charset=utf-8"
            assert resp.headers["Content-Security-Policy"] == server.CSP
        for path in ("static/.secret", "static/%2e%2e/server.py", "static/..%2fserver.py"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url + path, timeout=5)
            assert refused.value.code == 404, path
    finally:
        stop()


# ------------------------------------------------------------------------------------------------ the command


def test_bad_file_exits_2_naming_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
                   "    resources: {requests: {cpu: lots}}\n")  # fmt: skip
    result = CliRunner().invoke(main, ["ui", "-f", str(bad), "--port", "0"])
    assert result.exit_code == 2
    assert f"accelsched: error: {bad}: Pod default/p: spec.containers[0].resources.requests[cpu]:" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "no input"),
        (["-f", str(NODES), "--demo"], "not -f and --demo"),
        (["-f", str(NODES), "--step", "2"], "--step"),
        (["--demo", "--step", "99"], "--step"),
    ],
)
def test_bad_flags_exit_2(args: list[str], words: str) -> None:
    result = CliRunner().invoke(main, ["ui", *args, "--port", "0"])
    assert result.exit_code == 2 and words in result.output, result.output


def test_a_port_in_use_exits_2() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--port", str(port)])
    assert result.exit_code == 2 and f"--port: cannot listen on 127.0.0.1:{port}" in result.output


def test_once_prints_the_state() -> None:
    result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--once"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["order"] == ["node-a", "node-b", "node-c", "node-d"]


@pytest.mark.parametrize("port", ["0", "free"])
def test_the_command_serves_on_the_address_and_port_given(port: str) -> None:
    if port == "free":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
    command = [sys.executable, "-m", "accelsched.cli", "ui", "-f", str(NODES), "--address", "127.0.0.1", "--port", port]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        prefix, suffix = "accelsched ui: serving http://127.0.0.1:", "/ (read-only; Ctrl-C to stop)\n"
        assert line.startswith(prefix) and line.endswith(suffix), line + proc.stderr.read()
        bound = int(line[len(prefix) : -len(suffix)])
        assert bound > 0 and (port == "0" or bound == int(port))
        with urllib.request.urlopen(f"http://127.0.0.1:{bound}/api/state", timeout=10) as resp:
            assert json.loads(resp.read())["source"] == f"files: {NODES}"
    finally:
        proc.send_signal(2)  # Ctrl-C: uvicorn's own handler stops it cleanly
        assert proc.wait(10) == 0


# ------------------------------------------------------------------------------------------------ --sim alone


def test_sim_alone_serves_the_results_page(tmp_path: Path) -> None:
    results = tmp_path / "out"
    results.mkdir()
    (results / "timeline.csv").write_text(
        "policy,seed,time_s,allocated_milli,frag_milli,waiting_pods\nFGD,0,0,0,0,1\nFGD,0,10,500,20,0\n"
    )
    static = tmp_path / "static"
    static.mkdir()
    (static / "sim.html").write_text("<!doctype html><title>sim</title>")
    url, stop = server.start_in_thread(None, sim_dir=results, static_dir=static)
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # / redirects to /sim: the only page there is
            assert resp.url == url + "sim" and b"<title>sim</title>" in resp.read()
        with urllib.request.urlopen(url + "api/sim", timeout=5) as resp:
            assert json.loads(resp.read())["kind"] == "timeline"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "api/state", timeout=5)
        assert missing.value.code == 404 and "--sim only" in json.loads(missing.value.read())["error"]
    finally:
        stop()
    result = CliRunner().invoke(main, ["ui", "--sim", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2 and "--sim: " in result.output and "timeline.csv" in result.output


# ------------------------------------------------------------------------------------------------ live, offline


def _lab_snapshot(*pods: dict[str, Any]) -> Any:
    from accelsched.live.convert import Snapshot

    nodes = yaml.safe_load(NODES.read_text())["items"]
    return Snapshot(nodes=nodes, pods=list(pods), namespaces=[])


def _pod(name: str, accel: str, cpu: str = "1", node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {ACCEL: accel}, "requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"}, "spec": spec}


def test_live_state_runs_the_engine_and_leaves_bad_objects_out() -> None:
    from accelsched.ui.live import LiveState

    snapshot = _lab_snapshot(_pod("bound", "2", node="node-b"), _pod("waiting", "4"), _pod("odd", "1", cpu="lots"))
    state = LiveState(snapshot, "cluster https://example:6443")
    hub = Hub(state)
    view = hub.view()
    assert (view["mode"], view["source"]) == ("live", "cluster https://example:6443")
    assert any(w.startswith("left out Pod team/odd: ") and "requests[cpu]" in w for w in view["warnings"])
    assert hub.pod("team/bound")["phase"] == "Bound"
    assert hub.pod("team/waiting")["phase"] == "Placed"
    # The run worked on a copy: the snapshot's objects are as the API server sent them.
    assert "annotations" not in snapshot.pods[1]["metadata"] and "nodeName" not in snapshot.pods[1]["spec"]
    out = hub.whatif({"actions": [{"op": "add", "node": "node-a", "count": 2}]})
    assert {"node-a-whatif-1", "node-a-whatif-2"} <= set(out["order"])
    assert len(hub.state.nodes()) == 4


def test_live_state_copies_a_nodes_topology_and_slices_for_a_whatif_copy() -> None:
    from accelsched.ui.live import LiveState
    from accelsched.ui.state import WHATIF_COPY_ANNOTATION

    snapshot = _lab_snapshot()
    snapshot.topologies = [{"kind": "NodeResourceTopology", "metadata": {"name": "node-a"}, "zones": []}]
    snapshot.dra = {
        "ResourceSlice": [{"metadata": {"name": "s-a"}, "spec": {"nodeName": "node-a", "pool": {"name": "node-a"}}}]
    }
    copy_of_a = {"metadata": {"name": "node-a-whatif-1", "annotations": {WHATIF_COPY_ANNOTATION: "node-a"}}}
    replaced = LiveState(snapshot).replace([*snapshot.nodes, copy_of_a], [])
    assert [t["metadata"]["name"] for t in replaced.snapshot.topologies] == ["node-a", "node-a-whatif-1"]
    copied = replaced.snapshot.dra["ResourceSlice"][1]
    assert copied["metadata"]["name"] == "s-a-node-a-whatif-1"
    assert copied["spec"] == {"nodeName": "node-a-whatif-1", "pool": {"name": "node-a-whatif-1"}}
    assert len(snapshot.topologies) == 1 and len(snapshot.dra["ResourceSlice"]) == 1  # the original untouched


def test_read_only_kube_sends_no_write() -> None:
    from kubernetes import client as k8s

    from accelsched.live import kube as k
    from accelsched.ui.live import ReadOnlyError, ReadOnlyKube

    configuration = k8s.Configuration()
    configuration.host = "http://127.0.0.1:9"  # nothing listens: a request that went out would fail differently
    kube = ReadOnlyKube(k8s.ApiClient(configuration))
    writes = [
        lambda: kube.create(k.PODS, {}, "ns"),
        lambda: kube.replace(k.NODES, "n", {}),
        lambda: kube.patch(k.NODES, "n", {}),
        lambda: kube.delete(k.PODS, "p", "ns"),
        lambda: kube.bind("ns", "p", "n"),
        lambda: kube.request("POST", "/api/v1/namespaces"),
        lambda: kube.request("DELETE", "/api/v1/nodes/n"),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyError, match="accelsched ui is read-only: "):
            write()
    with pytest.raises(k.ApiError) as unreachable:  # a read is sent (and fails here: nobody listens)
        kube.list(k.NODES)
    assert not isinstance(unreachable.value, ReadOnlyError) and unreachable.value.status == 0


# ------------------------------------------------------------------------------------------------ review fixes


def test_off_loopback_the_host_must_be_an_address_or_this_machines_name() -> None:
    hub = Hub(FilesState.load([NODES]))
    url, stop = server.start_in_thread(hub, address="0.0.0.0")
    served = Served(url, hub)
    try:
        port = served.port
        allowed = [f"127.0.0.1:{port}", "localhost", f"10.1.2.3:{port}", "192.0.2.7", f"[fd00::1]:{port}"]
        allowed += [socket.gethostname(), f"{socket.getfqdn()}:{port}"]
        for host in allowed:
            assert served.raw("GET", "/api/state", {"Host": host})[0] == 200, host
        for host in ("evil.example", f"rebind.evil.example:{port}", f"10.1.2.3:{port + 1}", "fd00::1", ""):
            status, body = served.raw("GET", "/api/state", {"Host": host})
            assert status == 421 and "an IP address" in body["error"], host
    finally:
        stop()


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
@pytest.mark.parametrize("path", ["/api/state", "/api/pod?key=team/small", "/api/events", "/api/nothing"])
def test_a_cross_site_read_of_the_api_is_refused(served: Served, site: str, path: str) -> None:
    status, headers, body = served.request(path, headers={"Sec-Fetch-Site": site})
    assert status == 403 and "cross-site" in json.loads(body)["error"]
    assert headers["content-security-policy"] == server.CSP and headers["cache-control"] == "no-store"


def test_same_origin_and_direct_reads_are_served(served: Served) -> None:
    for site in ("same-origin", "none"):
        assert served.request("/api/state", headers={"Sec-Fetch-Site": site})[0] == 200, site
    # The page itself may be opened from a link on another site; only the API refuses.
    assert served.request("/", headers={"Sec-Fetch-Site": "cross-site"})[0] == 200


class _BrokenHub:
    """A hub whose reads fail, as a bug in the engine would: the server's answer to an exception is under test."""

    version = 1

    def view(self, since: int | None = None) -> dict[str, Any]:
        raise RuntimeError("engine bug: /secret/path/in/a/traceback")


def test_a_500_carries_the_security_headers_and_a_clean_json_error(caplog: pytest.LogCaptureFixture) -> None:
    url, stop = server.start_in_thread(_BrokenHub())
    try:
        with caplog.at_level(logging.ERROR, logger="accelsched.ui"):
            status, headers, body = Served(url, None).request("/api/state")  # type: ignore[arg-type]
    finally:
        stop()
    assert status == 500
    assert json.loads(body) == {"error": "internal error (RuntimeError); see the server's log"}
    assert b"secret" not in body and b"Traceback" not in body
    assert headers["content-type"] == "application/json"
    assert headers["content-security-policy"] == server.CSP
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-store"
    (record,) = [r for r in caplog.records if r.name == "accelsched.ui"]  # logged once, with the traceback
    assert record.exc_info and "secret" in str(record.exc_info[1])


def test_a_lone_surrogate_is_sent_as_valid_json(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd", "namespace": "team",'
        ' "annotations": {"note": "x\\ud800y", "ok": "\\u00e9"}}, "spec": {"containers": [{"name": "c"}]}}'
    )
    hub = Hub(FilesState.load([NODES, odd]))
    url, stop = server.start_in_thread(hub)
    try:
        status, _, body = Served(url, hub).request("/api/pod?key=team/odd")
    finally:
        stop()
    assert status == 200
    assert json.loads(body)["annotations"] == {"note": "x\ud800y", "ok": "é"}
    assert server.json_response({"a": "é"}).body == '{"a":"é"}'.encode()  # UTF-8 as is when it can be


def test_engine_work_is_bounded_and_an_unknown_explain_key_is_cached(served: Served) -> None:
    served.hub.publish(served.hub.state)  # a fresh version: nothing explained yet
    assert served.json("/api/explain?pod=team/ghost") == (404, {"error": "no pod team/ghost"})
    slots = served.hub.engine_slots
    taken = [slots.acquire(timeout=5) for _ in range(2)]  # as two long computations would hold them
    assert taken == [True, True]
    try:
        assert served.json("/api/explain?pod=team/ghost")[0] == 404  # cached: no engine run needed
        status, body = served.json("/api/explain?pod=team/small")
        assert status == 429 and body["error"].startswith("busy: ")
        whatif = json.dumps({"actions": [{"op": "cordon", "nodes": ["node-a"]}]}).encode()
        status, body = served.json(
            "/api/whatif", method="POST", body=whatif, headers={"Content-Type": "application/json"}
        )
        assert status == 429 and body["error"].startswith("busy: ")
    finally:
        for _ in taken:
            slots.release()
    assert served.json("/api/explain?pod=team/small")[0] == 200


def test_ctrl_c_with_an_open_event_stream_exits_at_once_and_off_loopback_is_warned_of() -> None:
    # One process for both (each start is a second of imports): bound to 0.0.0.0, reached over 127.0.0.1.
    command = [sys.executable, "-m", "accelsched.cli", "ui", "--demo", "--address", "0.0.0.0", "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("accelsched ui: serving http://0.0.0.0:"), line
        port = int(line.split("serving ", 1)[1].split(" ", 1)[0].rstrip("/").rsplit(":", 1)[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/events", timeout=10) as stream:
            assert stream.readline().startswith(b"retry: ")
            began = time.monotonic()
            proc.send_signal(2)
            proc.wait(5)
            elapsed = time.monotonic() - began
            assert stream.read() is not None  # the stream ended (no hang on the client either)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert elapsed < 2.0, elapsed
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert err.splitlines()[0] == (
        "accelsched ui: warning: listening on 0.0.0.0 without authentication: anyone who can reach this port can read "
        "the cluster's pods and labels"
    )


def test_step_must_be_a_step_of_the_lab() -> None:
    for step in ("-1", "0"):
        result = CliRunner().invoke(main, ["ui", "--demo", "--step", step, "--once"])
        assert result.exit_code == 2 and "--step" in result.output, result.output


@pytest.mark.parametrize("key", ["", "bad key!", "a/b/c", "-x"])
def test_group_by_must_be_a_label_key(key: str) -> None:
    result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--group-by", key, "--once"])
    assert result.exit_code == 2 and "--group-by: " in result.output, result.output


def test_group_by_a_label_no_node_has_is_a_warning() -> None:
    result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--group-by", "example.com/nothing", "--once"])
    assert result.exit_code == 0, result.output
    assert "accelsched: warning: --group-by: no node has the label example.com/nothing" in result.stderr
    assert json.loads(result.stdout)["groupBy"] == "example.com/nothing"
    result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--group-by", "accelsched.io/pdu", "--once"])
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_an_address_the_machine_lacks_is_blamed_on_address() -> None:
    result = CliRunner().invoke(main, ["ui", "-f", str(NODES), "--address", "192.0.2.1", "--port", "0"])
    assert result.exit_code == 2 and "--address: cannot listen on 192.0.2.1:0" in result.output, result.output


def test_a_malformed_kubeconfig_exits_2_naming_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("garbage: [")
    result = CliRunner().invoke(main, ["ui", "--kubeconfig", str(kubeconfig), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert f"accelsched: error: {kubeconfig}: cannot load cluster credentials: " in result.output
    assert "Traceback" not in result.output


def test_history_and_metrics_routes(served: Served) -> None:
    status, body = served.json("/api/history")
    assert status == 200 and body["points"] == served.hub.history.points() and body["points"]
    status, headers, text = served.request("/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert b"accelsched_ui_devices{" in text and b"accelsched_ui_state_version " in text
    assert headers["x-content-type-options"] == "nosniff"  # the guard's headers on every route
