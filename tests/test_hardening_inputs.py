"""Regression tests for issue 16's hostile inputs other than manifests: sysfs trees, the device-plugin config,
KubeSchedulerConfiguration, simulate's CSVs and options, and objects arriving in live mode.

Each test is named after the reproducer it pins. Through the CLI each must end in exit 2 and one line
``accelsched: error: FILE...`` (never a traceback, a hang or a kill), in bounded time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sysfs_builder as sb
from click.testing import CliRunner

from accelsched.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *needles: str) -> str:
    """Exit 2 and a single ``accelsched: error:`` line containing every needle; returns that line."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("accelsched: error:")]
    assert len(errors) == 1, result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


# -- topology --sysfs-root ------------------------------------------------------------------------------------------


def _small_tree(tmp_path: Path) -> Path:
    sb._small(tmp_path)
    return tmp_path / "sys" / "devices" / "system" / "node" / "node0"


@pytest.mark.parametrize(
    ("where", "content"),
    [("cpulist", "0-99999999"), ("cpulist", "0-3,8192"), ("online", "0-4294967295")],
)
def test_sysfs_huge_cpulist_is_an_error_not_a_list(tmp_path: Path, where: str, content: str) -> None:
    if where == "online":
        sb.no_numa(tmp_path)
        path = tmp_path / "sys" / "devices" / "system" / "cpu" / "online"
    else:
        path = _small_tree(tmp_path) / "cpulist"
    path.write_text(content + "\n")
    line = assert_one_line_error(run("topology", "--sysfs-root", str(tmp_path)), str(path), "8192 CPUs")
    assert content.split(",")[-1][:10] in line


def test_sysfs_cpulist_takes_digits_only(tmp_path: Path) -> None:
    from accelsched.topology.model import parse_cpulist

    assert parse_cpulist("0-3,8191") == (0, 1, 2, 3, 8191)
    for bad in ("+5", "1_0", "0-+3", " 0x1", "٣"):
        with pytest.raises(ValueError):
            parse_cpulist(bad)


def test_sysfs_fifo_is_refused_not_read(tmp_path: Path) -> None:
    node = _small_tree(tmp_path)
    (node / "distance").unlink()
    os.mkfifo(node / "distance")  # nobody ever writes: a plain read would block forever
    assert_one_line_error(run("topology", "--sysfs-root", str(tmp_path)), f"{node / 'distance'}: not a regular file")


def test_sysfs_link_to_dev_zero_is_refused(tmp_path: Path) -> None:
    node = _small_tree(tmp_path)
    (node / "meminfo").unlink()
    os.symlink("/dev/zero", node / "meminfo")
    assert_one_line_error(
        run("topology", "--sysfs-root", str(tmp_path)), f"{node / 'meminfo'}: not a regular file (a character device)"
    )


def test_sysfs_attribute_longer_than_a_page_is_refused(tmp_path: Path) -> None:
    sb._small(tmp_path).write(sb.SMALL_GPUS[0], "numa_node", "0" * (70 * 1024))
    assert_one_line_error(run("topology", "--sysfs-root", str(tmp_path)), "numa_node: longer than 65536 bytes")


def test_sysfs_memtotal_with_5000_digits_is_an_error(tmp_path: Path) -> None:
    node = _small_tree(tmp_path)
    (node / "meminfo").write_text(f"Node 0 MemTotal: {'9' * 5000} kB\n")
    assert_one_line_error(run("topology", "--sysfs-root", str(tmp_path)), f"{node / 'meminfo'}: MemTotal has 5000")


def test_sysfs_huge_numbers_elsewhere_are_warnings(tmp_path: Path) -> None:
    """A 5,000-digit distance or numa_node is garbage a warning names (int()'s digit limit is a ValueError)."""
    node = _small_tree(tmp_path)
    (node / "distance").write_text("1" * 5000 + "\n")
    from accelsched.topology.sysfs import discover

    topo = discover(tmp_path)
    assert any(w.startswith(f"{node / 'distance'}: garbage") for w in topo.warnings)
    assert topo.numa[0].cpus == (0, 1, 2, 3)


# -- device-plugin --config -----------------------------------------------------------------------------------------


def _plugin_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "dp.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("source: fake\nfake: {devices: .inf}\n", "fake.devices", "must be int"),
        ("source: fake\nfake: {devices: .nan}\n", "fake.devices", "must be int"),
        ("source: fake\nfake: {devices: 2.5}\n", "fake.devices", "must be int"),
        ("source: fake\nfake: {numaNodes: .inf}\n", "fake.numaNodes", "must be int"),
        ("source: fake\nfake: {devicesPerSwitch: -.inf}\n", "fake.devicesPerSwitch", "must be int"),
        ("source: fake\nfake: {devices: 2147483647}\n", "fake.devices", "must be 0..1024"),
        ("source: fake\nfake: {numaNodes: 99999999}\n", "fake.numaNodes", "must be 1..1024"),
        ("source: fake\nfake: {devices: 2, numa: [0, 1e400]}\n", "fake.numa", "one NUMA node"),
        ("source: fake\nfake: {devices: 2, numa: [0, true]}\n", "fake.numa", "one NUMA node"),
        ("healthIntervalSeconds: .inf\n", "healthIntervalSeconds", "finite"),
        ("healthIntervalSeconds: .nan\n", "healthIntervalSeconds", "finite"),
        ("watchIntervalSeconds: 1.0e+300\n", "watchIntervalSeconds", "0.01..86400"),
        (
            "source: fake\nfake: {health: [{afterSeconds: .nan, device: x-0, health: Healthy}]}\n",
            "afterSeconds",
            "finite",
        ),
        ("metrics: {port: .inf}\n", "metrics.port", "must be int"),
        ("sysfs: {vendors: ['0x17cb0']}\n", "sysfs.vendors", "not a PCI vendor ID"),
        ("sysfs: {vendors: [99999999999]}\n", "sysfs.vendors", "16-bit"),
        ('sysfs: {root: "/host\\0/sys"}\n', "sysfs.root", "control character"),
        ('socketDir: "/var/lib/kubelet/device-plugins\\n"\n', "socketDir", "control character"),
    ],
)
def test_device_plugin_config_bad_numbers_are_errors(tmp_path: Path, text: str, field: str, words: str) -> None:
    from accelsched.deviceplugin import config as plugin_config
    from accelsched.errors import InputError

    path = _plugin_config(tmp_path, text)
    with pytest.raises(InputError) as info:
        plugin_config.load(path)
    assert info.value.source == path
    assert info.value.field.endswith(field), info.value.field
    assert words in info.value.message


def test_device_plugin_config_inf_through_the_cli_is_one_line(tmp_path: Path) -> None:
    path = _plugin_config(tmp_path, "source: fake\nfake: {devices: .inf}\n")
    assert_one_line_error(run("device-plugin", "--config", path), path, "fake.devices")


@pytest.mark.parametrize(
    "name",
    [
        "qualcomm.com/ai-accelerator\n",  # YAML "|" block: advertised with the newline before
        "vendor.com/gpu ",
        "gpu",
        "kubernetes.io/gpu",
        "vendor.kubernetes.io/gpu",
        "requests.vendor.com/gpu",
        "Vendor.com/gpu",
        "vendor.com/",
        "vendor.com/-gpu",
        "vendor.com/gpu/extra",
        "vendor.com/" + "g" * 64,
        "v" * 245 + "/gpu",
    ],
)
def test_device_plugin_resource_name_is_what_the_kubelet_accepts(name: str) -> None:
    from accelsched.deviceplugin import config as plugin_config
    from accelsched.errors import InputError

    with pytest.raises(InputError) as info:
        plugin_config.parse({"resourceName": name}, "dp.yaml")
    assert info.value.field == "resourceName"
    assert "is not an extended resource name" in info.value.message


@pytest.mark.parametrize(
    "name", ["qualcomm.com/ai-accelerator", "nvidia.com/mig-1g.5gb", "a.b/C_d.E", "v" * 244 + "/" + "g" * 63]
)
def test_device_plugin_resource_names_the_kubelet_accepts_still_pass(name: str) -> None:
    from accelsched.deviceplugin import config as plugin_config

    assert plugin_config.parse({"resourceName": name}, "dp.yaml").resource_name == name


def test_device_plugin_resource_name_with_a_newline_from_yaml(tmp_path: Path) -> None:
    path = _plugin_config(tmp_path, "resourceName: |\n  qualcomm.com/ai-accelerator\nsource: fake\n")
    assert_one_line_error(run("device-plugin", "--config", path), path, "resourceName", "not an extended resource")


# -- --config KubeSchedulerConfiguration ----------------------------------------------------------------------------

CONFIG_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def _fit(args: str) -> str:
    return f"profiles: [{{pluginConfig: [{{name: NodeResourcesFit, args: {args}}}]}}]"


SCHEDULER_CONFIG_CASES = [
    # name, body, field path, words in the message
    ("empty schedulerName", "profiles: [{schedulerName: ''}]", "profiles[0].schedulerName", "Required value"),
    ("BOM schedulerName", 'profiles: [{schedulerName: "\\ufeffaccelsched"}]', "profiles[0].schedulerName", "RFC 1123"),
    ("blank schedulerName", "profiles: [{schedulerName: ' a'}]", "profiles[0].schedulerName", "RFC 1123"),
    ("unnamed second profile", "profiles: [{schedulerName: a}, {}]", "profiles[1].schedulerName", "Required value"),
    ("duplicate schedulerName", "profiles: [{schedulerName: a}, {schedulerName: a}]", "profiles[1].schedulerName",
     'Duplicate value: "a"'),
    ("podMaxBackoffSeconds inf", "podMaxBackoffSeconds: .inf", "podMaxBackoffSeconds", "must be an integer"),
    ("podMaxBackoffSeconds nan", "podMaxBackoffSeconds: .nan", "podMaxBackoffSeconds", "must be an integer"),
    ("podInitialBackoffSeconds float", "podInitialBackoffSeconds: 1.5", "podInitialBackoffSeconds",
     "must be an integer"),
    ("podInitialBackoffSeconds 0", "podInitialBackoffSeconds: 0", "podInitialBackoffSeconds", "must be greater than 0"),
    ("max below initial", "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4", "podMaxBackoffSeconds",
     "must be greater than or equal to PodInitialBackoffSeconds"),
    ("backoff past a Duration", "podMaxBackoffSeconds: 9223372037", "podMaxBackoffSeconds", "time.Duration"),
    ("backoff past int64", "podMaxBackoffSeconds: 99999999999999999999", "podMaxBackoffSeconds", "int64"),
    ("empty percentage", "percentageOfNodesToScore: ''", "percentageOfNodesToScore", "must be an integer"),
    ("percentage 101", "percentageOfNodesToScore: 101", "percentageOfNodesToScore", "not in valid range [0-100]"),
    ("profile percentage -1", "profiles: [{percentageOfNodesToScore: -1}]", "profiles[0].percentageOfNodesToScore",
     "not in valid range [0-100]"),
    ("parallelism 0", "parallelism: 0", "parallelism", "should be an integer value greater than zero"),
    ("parallelism string", "parallelism: '16'", "parallelism", "must be an integer"),
    ("v1beta3 field", "healthzBindAddress: 0.0.0.0:10251", "healthzBindAddress", "unknown field"),
    ("qps nan", "clientConnection: {qps: .nan}", "clientConnection.qps", "finite"),
    ("burst -1", "clientConnection: {burst: -1}", "clientConnection.burst", "must be non-negative"),
    ("lease not over renew", "leaderElection: {leaseDuration: 5s}", "leaderElection.leaseDuration",
     "must be greater than `RenewDeadline`"),
    ("lease duration garbage", "leaderElection: {leaseDuration: 15x}", "leaderElection.leaseDuration",
     "not a duration"),
    ("resourceLock", "leaderElection: {resourceLock: endpoints}", "leaderElection.resourceLock",
     'resourceLock value must be "leases"'),
    ("enableProfiling string", "enableProfiling: 'yes'", "enableProfiling", "true or false"),
    ("weight past int32", "profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFit, weight: 4294967296}]}}}]",
     "profiles[0].plugins.score.enabled[0].weight", "int32"),
    ("weight float", "profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFit, weight: .inf}]}}}]",
     "profiles[0].plugins.score.enabled[0].weight", "must be an integer"),
    ("weights overflow", "profiles: [{plugins: {score: {enabled: [{name: NodeResourcesFit, weight: 2147483647}]}}}]",
     "plugins.score.enabled", "total score of Score plugins could overflow"),
    ("plugin twice", "profiles: [{plugins: {filter: {enabled: [{name: NodeName}, {name: NodeName}]}}}]",
     "profiles[0].plugins.filter.enabled[1].name", 'plugin "NodeName" already registered'),
    ("plugin field typo", "profiles: [{plugins: {filter: {enabled: [{nam: NodeName}]}}}]",
     "profiles[0].plugins.filter.enabled[0].nam", "unknown field"),
    ("pluginConfig twice", "profiles: [{pluginConfig: [{name: NodeResourcesFit}, {name: NodeResourcesFit}]}]",
     "profiles[0].pluginConfig[1].name", 'Duplicate value: "NodeResourcesFit"'),
    ("args of another kind", _fit("{kind: InterPodAffinityArgs}"),
     "profiles[0].pluginConfig[0].args.kind", "has to match plugin args"),
    ("args for a plugin without args", "profiles: [{pluginConfig: [{name: DefaultBinder, args: {x: 1}}]}]",
     "profiles[0].pluginConfig[0].args", "takes no args"),
    ("addedAffinity ignored", "profiles: [{pluginConfig: [{name: NodeAffinity, args: {addedAffinity: {}}}]}]",
     "profiles[0].pluginConfig[0].args.addedAffinity", "not supported"),
    ("negative seed", "profiles: [{pluginConfig: [{name: RandomScore, args: {seed: -1}}]}]",
     "profiles[0].pluginConfig[0].args.seed", ">= 0"),
    ("args of a plugin not enabled", "profiles: [{pluginConfig: [{name: FGDScore, args: "
     "{typicalPods: [{cpuMilli: .inf}]}}]}]",
     "profiles[0].pluginConfig[0].args.typicalPods[0].cpuMilli", "whole number"),
    ("shape utilization float", _fit("{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
     "{shape: [{utilization: 1.5, score: 1}]}}}"), "shape[0].utilization", "must be an integer"),
    ("shape utilization inf", _fit("{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
     "{shape: [{utilization: .inf, score: 1}]}}}"), "shape[0].utilization", "must be an integer"),
    ("ratio without its type", _fit("{scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: {shape: []}}}"),
     "args.scoringStrategy.requestedToCapacityRatio", "must be nil when type is not RequestedToCapacityRatio"),
    ("ignoredResources label name", _fit("{ignoredResources: ['a b']}"), "args.ignoredResources[0]", "Invalid value"),
    ("ignoredResourceGroups slash", _fit("{ignoredResourceGroups: [a/b]}"), "args.ignoredResourceGroups[0]",
     "can't contain '/'"),
    ("balanced weight 2", "profiles: [{pluginConfig: [{name: NodeResourcesBalancedAllocation, args: {resources: "
     "[{name: cpu, weight: 2}]}}]}]", "args.resources[0].weight", "must be 1"),
    ("balanced resource twice", "profiles: [{pluginConfig: [{name: NodeResourcesBalancedAllocation, args: {resources: "
     "[{name: cpu}, {name: cpu}]}}]}]", "args.resources[1].name", "Duplicate value"),
    ("queueSort differs", "profiles: [{schedulerName: a, plugins: {queueSort: {disabled: [{name: '*'}], enabled: "
     "[{name: PrioritySort}]}}}, {schedulerName: b}]", "profiles[1].plugins.queueSort", "must be the same"),
    ("preemption percentage inf", "profiles: [{pluginConfig: [{name: DefaultPreemption, args: "
     "{minCandidateNodesPercentage: .inf}}]}]", "minCandidateNodesPercentage", "whole number"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "field", "words"), [c[1:] for c in SCHEDULER_CONFIG_CASES],
                         ids=[c[0] for c in SCHEDULER_CONFIG_CASES])  # fmt: skip
def test_scheduler_config_is_validated_as_kube_scheduler(tmp_path: Path, body: str, field: str, words: str) -> None:
    from accelsched.config import load_config
    from accelsched.errors import InputError

    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG_HEAD + body + "\n")
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.source == str(path)
    assert info.value.field.endswith(field), info.value.field
    assert words in info.value.message, info.value.message


def test_scheduler_config_valid_values_still_load(tmp_path: Path) -> None:
    from accelsched.config import load_config

    path = tmp_path / "sched.yaml"
    path.write_text(
        CONFIG_HEAD
        + """parallelism: 8
percentageOfNodesToScore: 0
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 2
leaderElection: {leaderElect: false, leaseDuration: 1s}
clientConnection: {qps: 5.5, burst: 0}
profiles:
  - schedulerName: a
    percentageOfNodesToScore: 100
    plugins: {score: {enabled: [{name: NodeResourcesFit, weight: 100}]}}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          kind: NodeResourcesFitArgs
          apiVersion: kubescheduler.config.k8s.io/v1
          ignoredResources: [example.com/foo]
          scoringStrategy:
            type: RequestedToCapacityRatio
            resources: [{name: cpu, weight: 1}]
            requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}
      - {name: RandomScore, args: {seed: 7}}
  - schedulerName: b.example
"""
    )
    config = load_config(path)
    assert list(config.profiles) == ["a", "b.example"]
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2.0, 2.0)
    assert config.profiles["a"].weights["NodeResourcesFit"] == 100


def test_scheduler_config_errors_through_the_cli_are_one_line(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODE)
    for body, field in (
        ("podMaxBackoffSeconds: .inf", "podMaxBackoffSeconds"),
        ("profiles: [{schedulerName: ''}]", "profiles[0].schedulerName"),
    ):
        config = tmp_path / "sched.yaml"
        config.write_text(CONFIG_HEAD + body + "\n")
        result = run("schedule", "-f", str(nodes), "--config", str(config))
        assert_one_line_error(result, f"{config}: KubeSchedulerConfiguration: {field}:")
    config.write_bytes((CONFIG_HEAD + "profiles: [{schedulerName: caf\xe9}]\n").encode("latin-1"))
    assert_one_line_error(run("schedule", "-f", str(nodes), "--config", str(config)), f"{config}: is not UTF-8")
    config.write_text(CONFIG_HEAD + "parallelism: 1\nparallelism: 2\n")  # strict decoding: no duplicate fields
    assert_one_line_error(run("schedule", "-f", str(nodes), "--config", str(config)), f"{config}", "parallelism")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    config.write_text(CONFIG_HEAD + bomb)
    assert_one_line_error(run("schedule", "-f", str(nodes), "--config", str(config)), f"{config}", "alias")


# -- simulate --pods PATH.csv and its options -----------------------------------------------------------------------


def _trace(tmp_path: Path, *pod_lines: str) -> Path:
    from sim_traces import POD_HEADER, trace_folder

    trace_folder(tmp_path, 2)
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([POD_HEADER, *pod_lines]) + "\n")
    return path


GOOD_ROW = "p0,4000,8192,1,500,,LS,Running,0,99,0"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("+5", "'+5' is not a whole number"),
        ("1_000", "'1_000' is not a whole number"),
        (" 5", "' 5' is not a whole number"),
        ("٣", "is not a whole number"),
        ("9" * 5000, "past the trace's limit"),
        ("99999999999999999999", "past the trace's limit"),
        ("1000000000001", "must be in 0..1000000000000"),
    ],
)
def test_trace_csv_integers_are_plain_digits(tmp_path: Path, value: str, words: str) -> None:
    pods = _trace(tmp_path, GOOD_ROW, f"p1,{value},8192,1,500,,LS,Running,0,99,0")
    result = run("simulate", "--data-dir", str(tmp_path), "--pods", str(pods), "--seeds", "1")
    assert_one_line_error(result, f"{pods}:3: p1: cpu_milli: ", words)


def test_trace_csv_duplicate_column_is_refused(tmp_path: Path) -> None:
    from sim_traces import POD_HEADER

    pods = _trace(tmp_path)
    pods.write_text(POD_HEADER + ",num_gpu\n" + GOOD_ROW + ",2\n")
    result = run("simulate", "--data-dir", str(tmp_path), "--pods", str(pods), "--seeds", "1")
    assert_one_line_error(result, f"{pods}:1: num_gpu: column 'num_gpu' appears twice")


def test_trace_csv_field_past_the_csv_limit_is_one_error(tmp_path: Path) -> None:
    pods = _trace(tmp_path, GOOD_ROW, "p1," + '"' + "x" * 200_000 + '"' + ",8192,1,500,,LS,Running,0,99,0")
    result = run("simulate", "--data-dir", str(tmp_path), "--pods", str(pods), "--seeds", "1")
    assert_one_line_error(result, f"{pods}:", "malformed CSV")


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["--inflation", "inf"], "--inflation: must be at most 10, got inf"),
        (["--inflation", "nan"], "--inflation: must be > 0, got nan"),
        (["--inflation", "1e9"], "--inflation: must be at most 10"),
        (["--compress", "nan"], "--compress: must be > 0, got nan"),
        (["--compress", "inf"], "--compress: must be at most 1e+09, got inf"),
        (["--seeds", "0-4294967295"], "--seeds: more than 1000 seeds"),
        (["--seeds", "0-99999999999"], "--seeds: '0-99999999999' is not a seed list"),
        (["--seeds", "5-4294967296"], "--seeds: '5-4294967296': seeds go from 0 to 4294967295"),
        (["--seeds", "+5"], "--seeds: '+5' is not a seed list"),
        (["--seeds", "9-3"], "--seeds: '9-3': seeds go from 0"),
    ],
)
def test_simulate_options_are_bounded_before_anything_runs(tmp_path: Path, args: list[str], what: str) -> None:
    # An empty data folder: the error about the option (not the missing trace) shows it was checked first.
    assert_one_line_error(run("simulate", "--data-dir", str(tmp_path), *args), f"accelsched: error: {what}")


def test_simulate_seeds_beyond_the_cpu_limit_still_work() -> None:
    from accelsched.sim.command import parse_seeds

    assert parse_seeds("42-44,100000,43") == [42, 43, 44, 100000]
    assert len(parse_seeds("0-999")) == 1000


def test_simulate_jobs_are_capped_at_tasks_and_cpus(tmp_path: Path) -> None:
    from accelsched.sim.command import worker_count

    cpus = os.cpu_count() or 1
    assert worker_count(None, 60) is None
    assert worker_count(10**9, 1) == 1
    assert worker_count(10**9, 60) == min(60, cpus)
    assert worker_count(1, 60) == 1
    pods = _trace(tmp_path, GOOD_ROW, "p1,1000,1024,1,250,,LS,Running,0,99,0")
    result = run("simulate", "--data-dir", str(tmp_path), "--pods", str(pods), "--seeds", "1", "--policy", "fgd",
                 "--jobs", "64", "-o", "json")  # fmt: skip
    assert result.exit_code == 0, result.output


# -- live mode: objects from the API server ------------------------------------------------------------------------

LIVE_ACCEL = "qualcomm.com/ai-accelerator"
DEEP = "[" * 3000 + "]" * 3000  # an annotation the API server stores as is; nested past Python's recursion limit


def _live_node(name: str, **meta: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, **meta},
        "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110", LIVE_ACCEL: "4"}},
    }


def _live_pod(name: str, **meta: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", **meta},
        "spec": {
            "schedulerName": "accelsched",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", LIVE_ACCEL: "1"}}}],
        },
    }


def _converted_and_scheduled(snapshot):
    from accelsched.engine import Session
    from accelsched.live import convert as live_convert

    converted = live_convert.convert(snapshot, {"accelsched"})
    results = Session.start(converted.inputs).schedule()
    return converted, {r.pod.name: r.node for r in results}


def test_live_object_without_a_usable_name_is_skipped_not_fatal() -> None:
    """A Node or NodeResourceTopology whose name is missing or not a string raised out of convert() (its error
    named no object convert could find), so every rebuild failed and nothing was scheduled."""
    from accelsched.live import convert as live_convert

    nrt = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": {"name": 7}}
    snap = live_convert.Snapshot(
        nodes=[
            _live_node("n1"),
            {**_live_node("x"), "metadata": {"name": ["n2"]}},
            {**_live_node("y"), "metadata": []},
        ],
        pods=[_live_pod("ok")],
        topologies=[nrt],
    )
    converted, placed = _converted_and_scheduled(snap)
    assert placed == {"ok": "n1"}
    assert [n.name for n in converted.inputs.nodes] == ["n1"]
    assert len(converted.errors) == 3, converted.errors
    assert any("metadata.name" in e for e in converted.errors.values())


@pytest.mark.parametrize("annotation", ["accelsched.io/partitioning", "accelsched.io/topology"])
def test_live_deeply_nested_annotation_is_skipped_with_the_object_named(annotation: str) -> None:
    """Nested past Python's recursion limit, an annotation raised RecursionError (not an InputError) and took 6 s
    to parse in pure-Python YAML: that Node and that Pod are left out and named, and the rest is scheduled."""
    from accelsched.live import convert as live_convert

    snap = live_convert.Snapshot(
        nodes=[_live_node("n1"), _live_node("deep", annotations={annotation: DEEP})],
        pods=[_live_pod("ok"), _live_pod("deep", annotations={annotation: DEEP, "accelsched.io/devices": DEEP})],
    )
    converted, placed = _converted_and_scheduled(snap)
    assert placed == {"ok": "n1"}
    assert set(converted.errors) == {"Node deep", "Pod default/deep"}
    assert "nesting depth" in converted.errors["Node deep"]
    assert "nested too deeply" in converted.errors["Pod default/deep"]


def test_live_conversion_skips_any_parser_exception_not_only_input_errors() -> None:
    """A 5,000-digit integer (JSON carries it; a CRD that preserves unknown fields keeps it) makes the parsers'
    own messages raise ValueError (Python's int-digit limit), not InputError: that object is left out, named,
    and scheduling goes on. The NodeResourceTopology case also exercises finding an unnamed culprit."""
    from accelsched.live import convert as live_convert

    huge = 10**5000
    odd = _live_pod("odd", labels={"app": huge})
    nrt = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "n2"},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "zones": [{"name": "node-0", "type": "Node", "resources": [
            {"name": LIVE_ACCEL, "capacity": "4", "allocatable": huge, "available": "4"}]}],
    }  # fmt: skip
    snap = live_convert.Snapshot(
        nodes=[_live_node("n1"), _live_node("n2")], pods=[_live_pod("ok"), odd], topologies=[nrt]
    )
    converted, placed = _converted_and_scheduled(snap)
    assert placed["ok"] in ("n1", "n2")
    assert set(converted.errors) == {"Pod default/odd", "NodeResourceTopology n2"}, converted.errors
    assert all("cannot be used (ValueError" in e for e in converted.errors.values()), converted.errors


@pytest.mark.parametrize(
    "spec",
    [{"minMember": "3"}, {"minMember": 10**30, "minResources": {"cpu": "1e999999"}}, {"minResources": [1]}, ["x"]],
)
def test_live_bad_pod_group_is_skipped(spec: object) -> None:
    from accelsched.live import convert as live_convert

    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": spec}  # fmt: skip
    snap = live_convert.Snapshot(nodes=[_live_node("n1")], pods=[_live_pod("ok")], pod_groups=[group])
    converted, placed = _converted_and_scheduled(snap)
    assert placed == {"ok": "n1"}
    assert list(converted.errors) == ["PodGroup default/g"]


def test_device_plugin_config_is_decoded_strictly(tmp_path: Path) -> None:
    """A key given twice kept the last value (resourceName advertised as whichever came last)."""
    path = _plugin_config(tmp_path, "resourceName: a.com/x\nresourceName: b.com/y\nsource: fake\n")
    assert_one_line_error(run("device-plugin", "--config", path), path, "resourceName")
    Path(path).write_bytes(b"resourceName: caf\xe9.com/x\n")
    assert_one_line_error(run("device-plugin", "--config", path), path, "UTF-8")
