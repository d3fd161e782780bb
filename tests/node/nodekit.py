"""A real node for the integration tests: containerd + runc + the CNI plugins, and the real kubelet v1.36.3.

Nothing here imitates a node component. The binaries come from ``hack/build-node.sh`` (the kubelet built from the
pinned k8s.io/kubernetes module; containerd, runc and the CNI plugins from Debian), and this module only writes
their configuration, starts them in folders of their own, and removes everything they made afterwards:
- :func:`oci_image` packs a static program into an OCI image-layout tarball; :meth:`Containerd.import_image` imports
  it (no registry is reachable here, so even the pod sandbox's pause image is built locally);
- :class:`Containerd` runs containerd with its own root, state and socket, the CRI plugin configured with
  ``restrict_oom_score_adj = true`` (docs/node.md says why runc fails without it on a VM whose root lacks
  CAP_SYS_RESOURCE) and a bridge + host-local + loopback CNI conflist;
- :class:`Kubelet` runs the kubelet against a test API server (tests/live/controlplane.py), with its own
  ``--root-dir`` and cgroup root. The device-plugins folder is not configurable in the kubelet: it is always
  ``/var/lib/kubelet/device-plugins``, so one machine runs one kubelet with device plugins at a time.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-node.sh"
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
# The pod sandbox image: containerd's sandbox_image and the name the imported pause tarball carries.
PAUSE_IMAGE = "accelsched.local/pause:probe"
PROBE_IMAGE = "accelsched.local/probe:1"
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """A node component could not be built, started or stopped; the message carries the log tail that says why."""


def tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def build_node(log_path: Path) -> Path:
    """Run ``hack/build-node.sh`` (idempotent, cached) and return the bin dir holding ``kubelet`` and ``probe``."""
    with log_path.open("wb") as log:
        proc = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=log, check=False)
    if proc.returncode != 0:
        raise NodeError(f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{tail(log_path)}")
    return Path(proc.stdout.decode().strip().splitlines()[-1])


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run containers the way the node tests do; empty when it has everything."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (containerd, the kubelet and runc need it)")
    for tool in ("containerd", "ctr", "runc"):
        if shutil.which(tool, path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin") is None:
            missing.append(f"{tool} (apt-get install containerd runc)")
    for plugin in ("bridge", "host-local", "loopback"):
        if not (Path(CNI_BIN_DIR) / plugin).exists():
            missing.append(f"{CNI_BIN_DIR}/{plugin} (apt-get install containernetworking-plugins)")
    if not Path("/proc/filesystems").exists() or "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("the overlay filesystem (containerd's overlayfs snapshotter)")
    return missing


def free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # an API error or a process not up yet: keep polling, report it if it lasts
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


# -- images ----------------------------------------------------------------------------------------------------


def _blob(blobs: dict[str, bytes], data: bytes, media_type: str) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def oci_image(dest: Path, ref: str, binary: Path, entrypoint: Sequence[str]) -> Path:
    """Write an OCI image-layout tarball of one layer holding ``binary`` at ``/<name>`` (and the empty folders the
    runtime mounts over), named ``ref`` through the ``io.containerd.image.name`` annotation ``ctr import`` reads."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("dev", "proc", "sys", "etc", "tmp", "run"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        data = binary.read_bytes()
        info = tarfile.TarInfo(binary.name)
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    raw = layer.getvalue()
    blobs: dict[str, bytes] = {}
    layer_desc = _blob(blobs, gzip.compress(raw, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip")
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "Env": ["PATH=/"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
    }
    config_desc = _blob(blobs, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = _blob(blobs, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    manifest_desc["annotations"] = {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
    files = {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}', "index.json": json.dumps(index).encode()}
    files.update({f"blobs/sha256/{d.split(':', 1)[1]}": b for d, b in blobs.items()})
    with tarfile.open(dest, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dest


# -- processes -------------------------------------------------------------------------------------------------


def spawn(args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(args)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(args),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )


def stop_process(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


class Containerd:
    """containerd with its CRI plugin, in ``workdir``: its own root, state, socket and CNI config."""

    NAMESPACE = "k8s.io"  # the CRI plugin's containerd namespace

    def __init__(self, workdir: Path, subnet: str = "10.244.77.0/24", bridge: str = "accelsched0") -> None:
        self.workdir = workdir
        self.subnet = subnet
        self.bridge = bridge
        self.socket = workdir / "containerd.sock"
        self.log = workdir / "containerd.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def write_config(self) -> Path:
        cni_conf = self.workdir / "cni"
        cni_conf.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": "accelsched-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.subnet}]],
                        # The default route through the bridge (the host): a pod's Service ClusterIPs are off its
                        # subnet, and kube-proxy's DNAT on the host is how they reach the API server (chart-e2e).
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.workdir / "cni-ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (cni_conf / "10-accelsched.conflist").write_text(json.dumps(conflist, indent=1))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{self.workdir / "root"}"
state = "{self.workdir / "state"}"
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[debug]
  level = "info"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # This VM's root has no CAP_SYS_RESOURCE: lowering oom_score_adj (the kubelet asks -998 for a sandbox) makes
  # runc's nsexec fail, which runc reports as "can't get final child's PID from pipe: EOF" (docs/node.md).
  restrict_oom_score_adj = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{cni_conf}"
  max_conf_num = 1
"""
        path = self.workdir / "config.toml"
        path.write_text(config)
        return path

    def start(self, timeout: float = 60.0) -> Containerd:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.write_config()
        self._proc = spawn(["containerd", "--config", str(config)], self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise NodeError(f"containerd exited with code {self._proc.returncode}; {self.log}:\n{tail(self.log)}")
            if self.socket.exists() and self.ctr("version", check=False).returncode == 0:
                return self
            time.sleep(0.2)
        raise NodeError(f"containerd not ready after {timeout:.0f}s; {self.log}:\n{tail(self.log)}")

    def ctr(self, *args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", self.NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def import_image(self, tarball: Path) -> None:
        self.ctr("images", "import", "--no-unpack=false", str(tarball))

    def images(self) -> list[str]:
        return self.ctr("images", "ls", "-q").stdout.split()

    def stop(self) -> None:
        """Kill what the CRI plugin left (tasks and their shims, containers), stop containerd, drop its mounts."""
        containers: list[str] = []
        if self._proc is not None and self._proc.poll() is None:
            for cid in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
                self.ctr("tasks", "kill", "-s", "SIGKILL", cid, check=False)
            for cid in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
                self.ctr("tasks", "delete", "-f", cid, check=False)
            containers = self.ctr("containers", "ls", "-q", check=False).stdout.split()
            for cid in containers:
                self.ctr("containers", "delete", cid, check=False)
        stop_process(self._proc)
        self._proc = None
        unmount_under(self.workdir)
        # What a sandbox the kubelet did not remove (a test that stopped early) leaves outside our folder: its
        # network namespace (an address in our subnet) and libcni's cached results.
        for netns in _netns_in(self.subnet):
            subprocess.run(["ip", "netns", "delete", netns], capture_output=True, check=False)
        results = Path("/var/lib/cni/results")
        for cid in containers:
            for cached in results.glob(f"*-{cid}-*"):
                cached.unlink(missing_ok=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True, check=False)


def _netns_in(subnet: str) -> list[str]:
    """Named network namespaces (/var/run/netns) with an IPv4 address in ``subnet``."""
    net = ipaddress.ip_network(subnet)
    folder = Path("/var/run/netns")
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        out = subprocess.run(
            ["ip", "netns", "exec", entry.name, "ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False
        ).stdout
        if any(ipaddress.ip_address(a) in net for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out)):
            found.append(entry.name)
    return found


def unmount_under(folder: Path) -> None:
    """Unmount ``folder`` and every mount below it (deepest first): overlay rootfs, shm and netns mounts left
    behind, and the bind mount of itself the kubelet makes of its root dir."""
    top = str(folder.resolve())
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for target in sorted((m for m in mounts if m == top or m.startswith(top + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)


class Kubelet:
    """The real kubelet against a test API server and a :class:`Containerd`, in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        bin_dir: Path,
        containerd: Containerd,
        kubeconfig: Path,
        node_name: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.workdir = workdir
        self.bin_dir = bin_dir
        self.containerd = containerd
        self.kubeconfig = kubeconfig
        self.node_name = node_name
        self.extra_config = dict(config or {})
        self.log = workdir / "kubelet.log"
        self.root_dir = workdir / "root"
        self.pod_logs_dir = workdir / "pod-logs"
        # Its own cgroup root, so its kubepods hierarchy (and what is left of it) is apart from anything else.
        self.cgroup_root = f"/accelsched-{node_name}"
        self.port, self.healthz_port = free_ports(2)
        self.node_ip = host_ip()
        self._proc: subprocess.Popen[bytes] | None = None

    def write_config(self) -> Path:
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This host is cgroup v1; kubelet 1.35+ refuses to start on v1 unless told not to.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": self.containerd.endpoint,
            # The kubelet refuses a loopback node IP, so it serves on the host's own address (the API server
            # dials it there for logs), on a free port, with nothing but the tests on it.
            "address": self.node_ip,
            "port": self.port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            # The API server reaches the kubelet for `kubectl logs` without a client certificate.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": str(self.pod_logs_dir),
            "failSwapOn": False,
            # Status as soon as it changes (device plugin registration, health), so tests do not wait 10 s.
            "nodeStatusUpdateFrequency": "1s",
            "nodeStatusReportFrequency": "1s",
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            # The imported images are the only ones there are (no registry): never garbage-collect them, and
            # never evict for a shared CI disk that is fuller than a real node's would be.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%"},
            "serializeImagePulls": False,
            "resolvConf": "",
        }
        config.update(self.extra_config)
        path = self.workdir / "kubelet-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _make_cgroup_root(self) -> None:
        for controller in _cgroup_controllers():
            (CGROUP_V1_ROOT / controller / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)

    def start(self, timeout: float = 120.0) -> Kubelet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.root_dir.mkdir(exist_ok=True)
        self.pod_logs_dir.mkdir(exist_ok=True)
        self._make_cgroup_root()
        config = self.write_config()
        args = [
            str(self.bin_dir / "kubelet"),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.root_dir}",
            f"--hostname-override={self.node_name}",
            f"--node-ip={self.node_ip}",
            "--v=2",
        ]
        self._proc = spawn(args, self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise NodeError(f"kubelet exited with code {self._proc.returncode}; {self.log}:\n{tail(self.log)}")
            if self.healthy():
                return self
            time.sleep(0.3)
        raise NodeError(f"kubelet not healthy after {timeout:.0f}s; {self.log}:\n{tail(self.log)}")

    def healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_process(self._proc, sig)
        self._proc = None

    def remove(self) -> None:
        """After stop(): unmount the pods' volumes and remove the kubelet's cgroups (the containers are gone)."""
        unmount_under(self.root_dir)
        for controller in _cgroup_controllers():
            base = CGROUP_V1_ROOT / controller / self.cgroup_root.lstrip("/")
            if base.exists():
                for sub in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                    with contextlib.suppress(OSError):
                        sub.rmdir()
                with contextlib.suppress(OSError):
                    base.rmdir()


def host_ip() -> str:
    """The address the kernel would send from by default: the one the kubelet would pick as node IP itself."""
    out = subprocess.run(["ip", "-4", "route", "get", "1.1.1.1"], capture_output=True, text=True, check=False).stdout
    words = out.split()
    if "src" not in words:
        raise NodeError(f"no IPv4 default route to take the node IP from (the kubelet refuses loopback): {out!r}")
    return words[words.index("src") + 1]


def _cgroup_controllers() -> list[str]:
    """The hierarchies mounted under /sys/fs/cgroup: the v1 ones (cpu, memory, ..., the named systemd one) and the
    hybrid host's v2 ``unified``, where the kubelet's runc makes the pods' cgroups too."""
    if not CGROUP_V1_ROOT.exists():
        return []
    return sorted(
        p.name for p in CGROUP_V1_ROOT.iterdir() if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists()
    )


@contextlib.contextmanager
def device_plugin_dir() -> Iterator[Path]:
    """The kubelet's fixed device-plugins folder. Refuses to run beside a live kubelet (its socket answers); leaves
    the folder as it found it apart from the kubelet's checkpoint, which the tests' kubelet wrote."""
    sock = DEVICE_PLUGIN_DIR / "kubelet.sock"
    if sock.exists():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(sock))
            except OSError:
                pass
            else:
                raise NodeError(f"a kubelet already serves {sock}: the node tests need this machine's kubelet slot")
    DEVICE_PLUGIN_DIR.mkdir(parents=True, exist_ok=True)
    try:
        yield DEVICE_PLUGIN_DIR
    finally:
        for leftover in ("kubelet.sock", "kubelet_internal_checkpoint"):
            with contextlib.suppress(FileNotFoundError):
                (DEVICE_PLUGIN_DIR / leftover).unlink()
