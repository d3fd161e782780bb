"""Issue 16's reproducers, one named test per class of bad input it lists (section 3), through the real CLI.

Each expects what the API server or kube-scheduler would do with the input: refuse it, as exit 2 and one line
``accelsched: error: FILE: KIND NS/NAME: FIELD: what``. The runs that once hung or ate memory run forked under
``RLIMIT_AS`` (2 GiB over the test process) and a timeout (tests/cli_limits.py), so a regression fails its test
instead of the test run.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
import sysfs_builder
import yaml
from cli_limits import Outcome, assert_bad_input, assert_contract, run_limited

ROOT = Path(__file__).resolve().parent.parent
BOUND = 5.0  # seconds any of these inputs may take to be refused (the issue saw hangs past 60 s)
GPU = "qualcomm.com/ai-accelerator"

NODE = f"""apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {{kubernetes.io/hostname: n1}}
status:
  capacity: {{cpu: "8", memory: 32Gi, pods: "110", {GPU}: "4"}}
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110", {GPU}: "4"}}
"""
POD = f"""apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: default}}
spec:
  containers:
    - name: c
      resources:
        requests: {{cpu: "1", memory: 1Gi, {GPU}: "1"}}
        limits: {{{GPU}: "1"}}
"""
POD_OBJ = "Pod default/p"
REQUESTS = "spec.containers[0].resources.requests"


def write(tmp_path: Path, text: str | bytes, name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def schedule(tmp_path: Path, text: str | bytes, *extra: str, timeout: float = 10) -> tuple[str, Outcome]:
    """``schedule -f NODE -f <text> -o json``, forked and bounded; returns the input's path and the outcome."""
    nodes = write(tmp_path, NODE, "nodes.yaml")
    path = write(tmp_path, text)
    return path, run_limited(["schedule", "-f", nodes, "-f", path, *extra, "-o", "json"], timeout=timeout)


def refused(tmp_path: Path, text: str | bytes, *fragments: str) -> str:
    """The input is refused, quickly, with one line that starts with its file and names every fragment."""
    path, out = schedule(tmp_path, text)
    return assert_bad_input(out, f"{path}: ", *fragments, max_seconds=BOUND)


# -- 3.1 tracebacks -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "encoded",
    [
        pytest.param(lambda t: t[:40] + b"\x89PNG\xff\xd8garbage" + t[40:], id="binary"),
        pytest.param(lambda t: t.replace(b"name: c", "name: café".encode("latin-1")), id="latin-1"),
    ],
)
def test_non_utf8_file_names_the_file_and_the_byte_offset(tmp_path, encoded):
    data = encoded(POD.encode())
    offset = next(i for i, b in enumerate(data) if b >= 0x80)
    line = refused(tmp_path, data)
    assert str(offset) in line, f"the first bad byte is at offset {offset}: {line}"


def test_utf16_with_bom_is_read_or_refused_never_misread(tmp_path):
    """YAML allows UTF-16 with a BOM, the API server takes UTF-8 JSON/YAML only: either is fine, a crash is not."""
    path, out = schedule(tmp_path, b"\xff\xfe" + POD.encode("utf-16-le"))
    assert_contract(out, [path])
    if out.exit_code == 0:
        (pod,) = json.loads(out.stdout)["pods"]
        assert (pod["name"], pod["node"]) == ("p", "n1")
    else:
        assert out.stderr.startswith(f"accelsched: error: {path}: ")


def test_quantity_1e999999_is_out_of_range(tmp_path):
    refused(tmp_path, POD.replace('cpu: "1"', 'cpu: "1e999999"'), POD_OBJ, f"{REQUESTS}[cpu]")


NRT = """apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: n1}
attributes: [{name: topologyManagerPolicy, value: single-numa-node}]
zones:
  - name: node-0
    type: Node
    resources: [{name: qualcomm.com/ai-accelerator, capacity: "2", allocatable: "2", available: "2"}]
  - name: node-1
    type: Node
    resources: [{name: qualcomm.com/ai-accelerator, capacity: "2", allocatable: "2", available: "2"}]
"""


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  - name: node-0", "  - name: {numa: 0}", "zones[0].name"),
        ("  - name: node-0\n    type: Node", "  - name: node-0\n    type: [Node]", "zones[0].type"),
        ("resources: [{name: qualcomm.com/ai-accelerator, capacity", "resources: [{name: [x], capacity", "zones[0]"),
        ('allocatable: "2", available: "2"}]\n  - name: node-1', 'allocatable: {n: 2}, available: "2"}]\n  - '
         "name: node-1", "zones[0].resources[0].allocatable"),
        ("value: single-numa-node", "value: {policy: x}", "attributes[0].value"),
    ],
    ids=["zone name dict", "zone type list", "resource name list", "allocatable dict", "attribute value dict"],
)  # fmt: skip
def test_nrt_wrong_types_are_named(tmp_path, old, new, field):
    assert old in NRT
    refused(tmp_path, NRT.replace(old, new, 1), "NodeResourceTopology n1", field)


SLICE = """apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-accel}
spec:
  nodeName: n1
  driver: accel.example.com
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
""" + "".join(
    f"    - name: accel-{i}\n"
    f"      attributes: {{accelsched.io/resource: {{string: {GPU}}}, numaNode: {{int: {i // 2}}}}}\n"
    for i in range(4)
)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("numaNode: {int: 0}", "numaNode: {int: [0]}", "spec.devices[0].attributes"),
        ("numaNode: {int: 0}", "numaNode: {int: {a: 1}}", "spec.devices[0].attributes"),
        ("numaNode: {int: 0}", "numaNode: [0]", "spec.devices[0].attributes"),
        ("- name: accel-0", "- name: {x: 1}", "spec.devices[0].name"),
        (f"{{string: {GPU}}}, numaNode: {{int: 0}}", f"{{string: [{GPU}]}}, numaNode: {{int: 0}}",
         "spec.devices[0].attributes"),
    ],
    ids=["int list", "int dict", "bare list", "name dict", "resource list"],
)  # fmt: skip
def test_resource_slice_wrong_types_are_named(tmp_path, old, new, field):
    assert old in SLICE
    refused(tmp_path, SLICE.replace(old, new, 1), "ResourceSlice n1-accel", field)


@pytest.mark.parametrize("where", ["manifest", "config", "device-plugin"])
def test_integer_past_pythons_digit_limit_is_refused(tmp_path, where):
    """Like ``MemTotal`` with 5,000 digits: int() refuses more than 4,300 digits with a ValueError."""
    digits = "1" + "0" * 5000
    if where == "manifest":
        refused(tmp_path, POD.replace("  containers:", f"  priority: {digits}\n  containers:"), POD_OBJ)
    elif where == "config":
        config = write(tmp_path, KSC + f"parallelism: {digits}\n", "config.yaml")
        _, out = schedule(tmp_path, POD, "--config", config)
        assert_bad_input(out, f"{config}: ", max_seconds=BOUND)
    else:
        path, out = device_plugin(tmp_path, PLUGIN.replace("devices: 4", f"devices: {digits}"))
        assert_bad_input(out, f"{path}: ", max_seconds=BOUND)


# -- 3.2 hangs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "value"),
    [("memory", "1e3000000"), (GPU, "1e9999999"), ("memory", "1e999999"), ("cpu", "1e9999999")],
)
def test_huge_exponent_quantity_is_refused_quickly(tmp_path, resource, value):
    text = POD.replace(f"{resource}: " + ('"1"' if resource != "memory" else "1Gi"), f'{resource}: "{value}"', 1)
    assert value in text
    refused(tmp_path, text, POD_OBJ, f"{REQUESTS}[{resource}]")


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 100m}}}]
"""


# -- 3.3 memory -----------------------------------------------------------------------------------------------------


def _bomb(levels: int = 9) -> str:
    lines = ['      x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"      x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def test_alias_bomb_in_deployment_template_is_refused(tmp_path):
    text = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}
      annotations:
{_bomb()}
    spec:
      containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
"""
    assert yaml.safe_load(text)  # a few hundred bytes of valid YAML: 9**9 strings once expanded
    refused(tmp_path, text)


def test_alias_bomb_in_an_annotation_is_refused(tmp_path):
    """The annotations accelsched parses as YAML (partitioning, topology) are read as boundedly as the file."""
    bomb = _bomb().replace("      x", "  x")
    text = f"""apiVersion: v1
kind: Node
metadata:
  name: mig
  annotations:
    accelsched.io/partitioning: |
      mode: timeslicing
      resource: nvidia.com/gpu
      replicas: 2
      devices: [gpu-0]
      resource:
{textwrap.indent(bomb, "      ")}
status:
  allocatable: {{cpu: "8", memory: 32Gi, pods: "110"}}
"""
    refused(tmp_path, text, "Node mig", "accelsched.io/partitioning")


def test_replicas_100000000_is_over_the_limit(tmp_path):
    text = DEPLOYMENT.replace("replicas: 1", "replicas: 100000000")
    refused(tmp_path, text, "Deployment default/web", "spec.replicas")


def test_huge_device_count_in_partitioning_annotation_is_over_the_limit(tmp_path):
    text = """apiVersion: v1
kind: Node
metadata:
  name: big
  annotations:
    accelsched.io/partitioning: |
      mode: timeslicing
      resource: nvidia.com/gpu
      replicas: 4
      devices: 100000000
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
"""
    refused(tmp_path, text, "Node big", "accelsched.io/partitioning")


def test_huge_device_count_in_nrt_is_refused(tmp_path):
    huge = NRT.replace('allocatable: "2", available: "2"', 'allocatable: "100000000", available: "100000000"', 1)
    refused(tmp_path, huge, "NodeResourceTopology n1", "zones")


# -- 3.4 accepted silently, though the API server refuses them -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "obj", "field"),
    [
        (POD.replace("metadata: {name: p,", "metadata: {labelss: {a: b}, name: p,"), POD_OBJ, "metadata.labelss"),
        (POD.replace("  containers:", "  nodeNamee: n1\n  containers:"), POD_OBJ, "spec.nodeNamee"),
        ("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 10\n"
         "globalDefaultt: true\n", "PriorityClass high", "globalDefaultt"),
    ],
    ids=["labelss", "nodeNamee", "globalDefaultt"],
)  # fmt: skip
def test_unknown_field_is_refused(tmp_path, text, obj, field):
    refused(tmp_path, text, obj, field)


@pytest.mark.parametrize(
    "labels",
    ['{"bad key!": x}', "{app: -bad-}", '{app: "' + "x" * 64 + '"}', '{"a/b/c": x}', '{"": x}', '{"-a.io/b": x}'],
    ids=["space in key", "value starts with dash", "value 64 chars", "two slashes", "empty key", "bad prefix"],
)
def test_label_syntax_is_checked(tmp_path, labels):
    refused(tmp_path, POD.replace("namespace: default}", f"namespace: default, labels: {labels}}}"), "metadata.labels")


@pytest.mark.parametrize("name", ["Bad_Name", "-p", "p.", "a" * 254, "ñ"])
def test_name_that_is_not_a_dns_subdomain_is_refused(tmp_path, name):
    refused(tmp_path, POD.replace("name: p,", f'name: "{name}",'), "metadata.name")


@pytest.mark.parametrize(
    ("text", "obj"),
    [
        (POD.replace("apiVersion: v1", "apiVersion: apps/v1"), POD_OBJ),
        (DEPLOYMENT.replace("apiVersion: apps/v1", "apiVersion: v1"), "Deployment default/web"),
        (NODE.replace("apiVersion: v1", "apiVersion: batch/v1").replace("name: n1", "name: n2"), "Node n2"),
    ],
    ids=["apps/v1 Pod", "v1 Deployment", "batch/v1 Node"],
)
def test_api_version_that_does_not_serve_the_kind_is_refused(tmp_path, text, obj):
    refused(tmp_path, text, obj, "apiVersion")


def test_toleration_effect_that_does_not_exist_is_refused(tmp_path):
    text = POD.replace("  containers:", "  tolerations: [{key: k, operator: Exists, effect: Sometimes}]\n  containers:")
    refused(tmp_path, text, POD_OBJ, "spec.tolerations[0].effect")


# -- 3.5 the other inputs: topology --sysfs-root ---------------------------------------------------------------------


def topology(root: Path, timeout: float = 10) -> Outcome:
    return run_limited(["topology", "--sysfs-root", str(root), "-o", "json"], timeout=timeout)


def _node0(root: Path) -> Path:
    sysfs_builder.qaic_box(root)
    return root / "sys/devices/system/node/node0"


@pytest.mark.parametrize(
    ("where", "content"),
    [("sys/devices/system/node/node0/cpulist", "0-99999999"), ("sys/devices/system/cpu/online", "0-4294967295")],
    ids=["cpulist", "cpu online"],
)
def test_sysfs_huge_cpu_range_is_refused_not_expanded(tmp_path, where, content):
    # cpu/online is read where there are no NUMA node folders.
    (sysfs_builder.qaic_box if "node0" in where else sysfs_builder.no_numa)(tmp_path)
    (tmp_path / where).write_text(content + "\n")
    assert_bad_input(topology(tmp_path), str(tmp_path / where), max_seconds=BOUND)


@pytest.mark.parametrize("special", ["fifo", "dev-zero"])
def test_sysfs_file_that_never_ends_is_refused(tmp_path, special):
    path = _node0(tmp_path) / "distance"
    path.unlink()
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    assert_bad_input(topology(tmp_path), str(path), max_seconds=BOUND)


def test_sysfs_memtotal_with_5000_digits_is_no_traceback(tmp_path):
    """Python's int-digit limit: the value is refused, or left out with a warning, naming the file."""
    path = _node0(tmp_path) / "meminfo"
    path.write_text(f"Node 0 MemTotal: {'9' * 5000} kB\nNode 0 MemFree: 1 kB\n")
    out = topology(tmp_path)
    assert_contract(out, [str(path)])
    assert out.seconds <= BOUND
    assert str(path) in out.stderr, f"the file is named in an error or a warning\n{out.describe()}"


# -- 3.5 device-plugin --config --------------------------------------------------------------------------------------

PLUGIN = """resourceName: qualcomm.com/ai-accelerator
source: fake
fake: {devices: 4, numaNodes: 2}
metrics: {port: 0}
"""


def device_plugin(tmp_path: Path, text: str) -> tuple[str, Outcome]:
    """``device-plugin --config``: a config that passes would start serving, and the timeout would fail it."""
    path = write(tmp_path, text, "plugin.yaml")
    socket_dir = tmp_path / "sockets"
    socket_dir.mkdir(exist_ok=True)
    args = ["device-plugin", "--config", path, "--socket-dir", str(socket_dir)]
    return path, run_limited(args, timeout=10)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("devices: 4", "devices: .inf", "fake.devices"),
        ("devices: 4", "devices: .nan", "fake.devices"),
        ("numaNodes: 2", "numaNodes: .inf", "fake.numaNodes"),
        ("port: 0", "port: .nan", "metrics.port"),
        ("fake: {", "healthIntervalSeconds: .nan\nfake: {", "healthIntervalSeconds"),
        ("devices: 4", "devices: 2147483647", "fake.devices"),
    ],
    ids=["devices inf", "devices nan", "numaNodes inf", "port nan", "interval nan", "devices 2**31-1"],
)
def test_device_plugin_config_bad_number_names_the_field(tmp_path, old, new, field):
    path, out = device_plugin(tmp_path, PLUGIN.replace(old, new))
    assert_bad_input(out, f"{path}: ", field, max_seconds=BOUND)


# -- 3.5 --config (KubeSchedulerConfiguration) -----------------------------------------------------------------------

KSC = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("profiles: [{schedulerName: ''}]", "profiles[0].schedulerName"),
        ('profiles: [{schedulerName: "\\ufeffdefault-scheduler"}]', "profiles[0].schedulerName"),
        ("podMaxBackoffSeconds: .inf", "podMaxBackoffSeconds"),
        ("percentageOfNodesToScore: ''", "percentageOfNodesToScore"),
        ("profiles: [{pluginConfig: [{name: RandomScore, args: {seed: -1}}]}]", "args.seed"),
    ],
    ids=["empty schedulerName", "BOM schedulerName", "backoff inf", "empty percentage", "negative seed"],
)
def test_scheduler_config_invalid_value_is_refused(tmp_path, body, field):
    config = write(tmp_path, KSC + body + "\n", "config.yaml")
    _, out = schedule(tmp_path, POD, "--config", config)
    assert_bad_input(out, f"{config}: ", field, max_seconds=BOUND)


# -- 3.5 simulate --pods PATH.csv and its options --------------------------------------------------------------------

SIM_NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,32000,65536,2,T4\nn-1,64000,131072,4,G2\n"
SIM_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)
SIM_ROW = "p0,4000,8192,1,500,,LS,Running,10,99,10"


def simulate(tmp_path: Path, *args: str, pods: str | None = None, timeout: float = 30) -> tuple[Path, Outcome]:
    from accelsched.sim.command import simulate as command

    (tmp_path / "openb_node_list_gpu_node.csv").write_text(SIM_NODES)
    path = tmp_path / "pods.csv"
    path.write_text(pods if pods is not None else f"{SIM_HEADER}\n{SIM_ROW}\np1,2000,4096,1,1000,,LS,Running,20,,20\n")
    data = "--data-dir" if any("--data-dir" in getattr(p, "opts", []) for p in command.params) else "--data"
    base = ["simulate", data, str(tmp_path), "--pods", str(path), "--policy", "bestfit", "-o", "json"]
    defaults = {"--seeds": "1", "--jobs": "1"}
    extra = [a for k, v in defaults.items() if k not in args for a in (k, v)]
    return path, run_limited([*base, *extra, *args], timeout=timeout)


@pytest.mark.parametrize("cell", ["+5", "1_000", " 7"], ids=["plus sign", "underscore", "leading space"])
def test_simulate_csv_integer_is_digits_only(tmp_path, cell):
    pods = f"{SIM_HEADER}\n{SIM_ROW.replace('4000', cell, 1)}\n"
    path, out = simulate(tmp_path, pods=pods)
    assert_bad_input(out, f"{path}:2", "cpu_milli", max_seconds=BOUND)


def test_simulate_csv_duplicated_column_is_refused(tmp_path):
    pods = f"{SIM_HEADER},cpu_milli\n{SIM_ROW},5\n"
    path, out = simulate(tmp_path, pods=pods)
    assert_bad_input(out, f"{path}:1", "cpu_milli", max_seconds=BOUND)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--inflation", "inf"), ("--inflation", "nan"), ("--seeds", "0-4294967295"), ("--compress", "inf")],
)
def test_simulate_option_out_of_range_is_refused_quickly(tmp_path, option, value):
    _, out = simulate(tmp_path, option, value, timeout=15)
    assert_bad_input(out, option, max_seconds=BOUND)


def test_simulate_jobs_never_forks_more_workers_than_tasks(tmp_path):
    _, out = simulate(tmp_path, "--jobs", "64", "--seeds", "1")
    assert_contract(out)
    assert out.exit_code == 0, out.describe()
    assert out.max_children <= 1, f"{out.max_children} worker processes for one experiment\n{out.describe()}"


# -- 3.6 silent wrong answers ----------------------------------------------------------------------------------------


def test_duplicate_yaml_key_is_refused_not_last_wins(tmp_path):
    text = POD.replace('requests: {cpu: "1",', 'requests: {cpu: "64", cpu: "1",')
    refused(tmp_path, text, "cpu")


def test_partitioning_dynamic_no_string_is_refused_not_true(tmp_path):
    text = """apiVersion: v1
kind: Node
metadata:
  name: mig
  annotations:
    accelsched.io/partitioning: |
      mode: mig
      model: A100-40GB
      strategy: mixed
      dynamic: 'no'
      devices: [gpu-0]
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
"""
    refused(tmp_path, text, "Node mig", "accelsched.io/partitioning", "dynamic")


def test_unquoted_label_value_1_10_is_refused_not_read_as_1_1(tmp_path):
    """``version: 1.10`` is a YAML float; the API server's labels are strings and it refuses a number."""
    text = NODE.replace("name: n1\n  labels: {", "name: n2\n  labels: {version: 1.10, ")
    refused(tmp_path, text, "Node n2", "metadata.labels")


def test_device_plugin_resource_name_with_trailing_newline_is_refused(tmp_path):
    path, out = device_plugin(tmp_path, PLUGIN.replace("resourceName: qualcomm.com/ai-accelerator",
                                                      'resourceName: "qualcomm.com/ai-accelerator\\n"'))  # fmt: skip
    assert_bad_input(out, f"{path}: ", "resourceName", max_seconds=BOUND)
