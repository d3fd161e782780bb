"""Gangs on a multi-level fabric through the whole engine: Kueue's Topology and podset annotations read and
checked as Kueue checks them (exit 2, the field named), the gang kept in one block with slices whole per rack and
ranks in order, all or nothing, and the failure message with the smallest change."""

from __future__ import annotations

import itertools

import pytest
import yaml
from builders import start
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.cli import main
from accelsched.errors import InputError

GPU = "nvidia.com/gpu"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


def topology(*levels: str, name: str = "default") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def nodes(blocks: int, racks: int, hosts: int, gpus: int = 8) -> list[dict]:
    out = []
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                name = f"b{b}-r{r}-h{h}"
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name}
                out.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": name, "labels": labels},
                        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}},
                    }
                )
    return out


def busy(name: str, node: str, gpus: int = 8) -> dict:
    res = {GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]},
    }


def job(name: str, pods: int, gpus: int = 8, **annotations: str) -> dict:
    res = {GPU: str(gpus)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"labels": {"scheduling.x-k8s.io/pod-group": name}, "annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": res, "limits": res}}],
                },
            },
        },
    }


def by_rank(results: list) -> list:
    """Results of a Job's pods by completion index."""
    pods = [r for r in results if "batch.kubernetes.io/job-completion-index" in r.pod.labels]
    return sorted(pods, key=lambda r: int(r.pod.labels["batch.kubernetes.io/job-completion-index"]))


def rack(node: str) -> str:
    return node.rsplit("-", 1)[0]


def test_a_gang_stays_in_the_tightest_block_with_whole_slices_per_rack_and_ranks_in_order():
    docs = [topology(BLOCK, RACK, HOST), *nodes(2, 2, 4), busy("x", "b0-r1-h0")]
    docs.append(job("train", 6, **{REQUIRED: BLOCK, SLICE: RACK, SLICE_SIZE: "3"}))
    results = by_rank(start(*docs).schedule())
    placed = [r.node for r in results]
    assert all(placed)
    assert {n.split("-")[0] for n in placed} == {"b0"}  # b0 (7 free hosts) is tighter than b1 (8)
    assert len({rack(n) for n in placed[:3]}) == 1 and len({rack(n) for n in placed[3:]}) == 1  # slices whole
    assert placed == sorted(placed, key=lambda n: (rack(n) != rack(placed[0]), n))  # ranks host by host


def test_a_gang_that_fits_no_block_binds_nothing_and_names_the_smallest_change():
    docs = [topology(BLOCK, RACK, HOST), *nodes(2, 2, 2)]
    docs += [busy("x0", "b0-r0-h0"), busy("x1", "b1-r0-h0"), busy("x2", "b1-r1-h0")]
    docs.append(job("train", 4, **{REQUIRED: BLOCK, SLICE: RACK, SLICE_SIZE: "2"}))
    session = start(*docs)
    results = by_rank(session.schedule())
    assert not any(r.node for r in results)  # all or nothing
    message = results[0].message
    assert 'topology "default" allows to fit only 1 out of 2 slice(s)' in message
    assert "1 more free node in cloud.provider.com/topology-block b0 would fit the gang (free b0-r0-h0)" in message
    notes = results[0].diagnosis.notes
    assert notes[0] == "cloud.provider.com/topology-block b0: 1 of 2 slices of 2 fit; 1 of 4 nodes take none"


def test_an_nvlink_clique_label_is_a_level():
    docs = []
    for i in range(6):  # two NVLink domains: 4 trays and 2 trays
        clique = "7f3c.1" if i < 4 else "7f3c.2"
        node = nodes(1, 1, 1)[0]
        node["metadata"] = {"name": f"gb{i}", "labels": {"nvidia.com/gpu.clique": clique}}
        docs.append(node)
    docs.append(job("train", 2, **{REQUIRED: "nvidia.com/gpu.clique"}))
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert set(placed) <= {"gb4", "gb5"}  # the smaller domain that holds it (BestFit)


def test_a_preferred_level_falls_back_to_the_next_level_up():
    docs = [topology(BLOCK, RACK, HOST), *nodes(2, 2, 2)]
    docs.append(job("train", 3, **{PREFERRED: RACK}))
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert all(placed) and len({n.split("-")[0] for n in placed}) == 1 and len({rack(n) for n in placed}) == 2


def test_rank_labels_of_kubeflow_and_jobset_order_the_members():
    from accelsched.fabric.request import rank

    master = rank({"training.kubeflow.org/replica-type": "Master", "training.kubeflow.org/replica-index": "0"}, {}, "m")
    worker = rank({"training.kubeflow.org/replica-type": "Worker", "training.kubeflow.org/replica-index": "0"}, {}, "w")
    assert master < worker
    jobset = [
        rank({"jobset.sigs.k8s.io/job-index": j, "batch.kubernetes.io/job-completion-index": c}, {}, f"p{j}{c}")
        for j, c in [("1", "0"), ("0", "10"), ("0", "2")]
    ]
    assert sorted(jobset) == [jobset[2], jobset[1], jobset[0]]


@settings(max_examples=30, deadline=None)
@given(
    busy_nodes=st.sets(st.integers(0, 15), max_size=8),
    pods=st.integers(1, 8),
    size=st.sampled_from([1, 2, 4]),
    level=st.sampled_from([BLOCK, RACK]),
)
def test_gangs_are_all_or_nothing_and_keep_their_domains(busy_nodes, pods, size, level):
    fabric = nodes(2, 2, 4)
    docs = [topology(BLOCK, RACK, HOST), *fabric]
    docs += [busy(f"x{i}", fabric[i]["metadata"]["name"]) for i in sorted(busy_nodes)]
    count = pods * size
    annotations = {REQUIRED: level, SLICE: RACK, SLICE_SIZE: str(size)} if size > 1 else {REQUIRED: level}
    if size > 1 and level == RACK:
        annotations[SLICE] = HOST
    docs.append(job("g", count, **annotations))
    results = by_rank(start(*docs).schedule())
    placed = [r.node for r in results]
    assert all(placed) or not any(placed)
    if not all(placed):
        return
    depth = 1 if level == BLOCK else 2
    assert len({"-".join(n.split("-")[:depth]) for n in placed}) == 1
    if size > 1:
        inner = 2 if level == BLOCK else 3
        for k in range(0, count, size):
            assert len({"-".join(n.split("-")[:inner]) for n in placed[k : k + size]}) == 1
    for depth in (2, 3):  # rank order: each rack's and each host's ranks are consecutive
        runs = ["-".join(n.split("-")[:depth]) for n in placed]
        assert sum(a != b for a, b in itertools.pairwise(runs)) == len(set(runs)) - 1


BAD = {
    "no levels": (topology(), "spec.levels: Invalid value: 0: spec.levels in body should have at least 1 items"),
    "duplicate": (topology(RACK, RACK), 'spec.levels: Invalid value: "array": must be unique'),
    "hostname not last": (
        topology(HOST, RACK),
        'spec.levels: Invalid value: "array": the kubernetes.io/hostname label can only be used at the lowest level',
    ),
    "bad label": (topology("Rack/x"), 'spec.levels[0].nodeLabel: Invalid value: "Rack/x"'),
    "too many": (topology(*[f"l{i}" for i in range(17)]), "spec.levels: Too many: 17: must have at most 16 items"),
    "two requests": (
        job("j", 2, **{REQUIRED: RACK, PREFERRED: BLOCK}),
        "must not contain more than one topology annotation",
    ),
    "slice size missing": (
        job("j", 2, **{SLICE: RACK}),
        f"metadata.annotations[{SLICE_SIZE}]: Required value: must be set when '{SLICE}' is specified",
    ),
    "slice size not a number": (
        job("j", 2, **{SLICE: RACK, SLICE_SIZE: "two"}),
        f'metadata.annotations[{SLICE_SIZE}]: Invalid value: "two": must be a numeric value',
    ),
    "slice size zero": (
        job("j", 2, **{SLICE: RACK, SLICE_SIZE: "0"}),
        'Invalid value: "0": must be greater than or equal to 1',
    ),
    "slice size alone": (
        job("j", 2, **{SLICE_SIZE: "2"}),
        f"Forbidden: may not be set when '{SLICE}' is not specified",
    ),
    "unconstrained not a bool": (
        job("j", 2, **{"kueue.x-k8s.io/podset-unconstrained-topology": "yes"}),
        'Invalid value: "yes": must be a boolean value',
    ),
    "level not a label": (job("j", 2, **{REQUIRED: "-rack"}), f"metadata.annotations[{REQUIRED}]: Invalid value"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_topology_input_is_refused_naming_the_field(case):
    doc, expected = BAD[case]
    with pytest.raises(InputError) as err:
        start(*nodes(1, 1, 1), doc)
    assert expected in str(err.value)


def test_bad_topology_is_one_line_exit_2_on_the_cli(tmp_path):
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump_all([*nodes(1, 1, 1), topology(HOST, RACK)]))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Topology default" in lines[0] and "spec.levels" in lines[0]
    assert str(path) in lines[0]


def test_a_pod_group_carries_kueue_annotations_checked_against_min_member():
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "annotations": {SLICE: RACK, SLICE_SIZE: "4"}},
        "spec": {"minMember": 2},
    }
    with pytest.raises(InputError, match='Invalid value: "4": must not be greater than pod set count 2'):
        start(*nodes(1, 1, 1), group)


def low(name: str, node: str, started: str, gpus: int = 8) -> dict:
    pod = busy(name, node, gpus)
    pod["spec"]["priorityClassName"] = "low"
    pod["status"] = {"phase": "Running", "startTime": started}
    return pod


PRIORITIES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 10},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
]


def high_job(name: str, pods: int, **annotations: str) -> dict:
    doc = job(name, pods, **annotations)
    doc["spec"]["template"]["spec"]["priorityClassName"] = "high"
    return doc


def test_preemption_frees_one_rack_with_the_fewest_gpu_hours():
    # Two racks of 2 hosts, each host running one low-priority pod: rack r0's started long ago, rack r1's lately.
    docs = [*PRIORITIES, topology(BLOCK, RACK, HOST), *nodes(1, 2, 2)]
    docs += [low("old-0", "b0-r0-h0", "2026-01-01T00:00:00Z"), low("old-1", "b0-r0-h1", "2026-01-01T00:00:00Z")]
    docs += [low("new-0", "b0-r1-h0", "2026-01-02T00:00:00Z"), low("new-1", "b0-r1-h1", "2026-01-02T00:00:00Z")]
    docs.append(high_job("train", 2, **{REQUIRED: RACK}))
    session = start(*docs)
    results = session.schedule()
    by_name = {r.pod.name: r for r in results}
    placed = [r.node for r in by_rank(results)]
    assert placed == ["b0-r1-h0", "b0-r1-h1"]  # the young rack: 0 GPU-hours lost against 384
    assert by_name["new-0"].message.startswith("Preempted by default/train-") and by_name["new-1"].preempted_by
    assert {"default/old-0", "default/old-1"} <= set(session.cluster.pod_node)  # still running
    evicted = {p.name for r in results for p in r.preempted}
    assert evicted == {"new-0", "new-1"}


def test_preemption_evicts_only_what_the_gang_needs_in_one_domain():
    docs = [*PRIORITIES, topology(BLOCK, RACK, HOST), *nodes(1, 2, 2)]
    docs += [low("a", "b0-r0-h0", "2026-01-01T00:00:00Z"), low("b", "b0-r1-h0", "2026-01-01T00:00:00Z")]
    docs.append(high_job("train", 2, **{REQUIRED: RACK}))
    results = start(*docs).schedule()
    evicted = {p.name for r in results for p in r.preempted}
    placed = {r.node for r in by_rank(results)}
    assert len(evicted) == 1 and len(placed) == 2 and len({rack(n) for n in placed}) == 1


def test_no_pod_is_evicted_for_a_gang_that_would_still_not_fit():
    # Each rack holds 2 pods at most; the gang needs 3 in one rack: evicting cannot help, so nothing is evicted.
    docs = [*PRIORITIES, topology(BLOCK, RACK, HOST), *nodes(1, 2, 2)]
    docs += [low(f"p{i}", f"b0-r{i // 2}-h{i % 2}", "2026-01-01T00:00:00Z") for i in range(4)]
    docs.append(high_job("train", 3, **{REQUIRED: RACK}))
    results = start(*docs).schedule()
    assert not any(r.preempted or r.preempted_by for r in results)
    assert not any(r.node for r in by_rank(results))


@settings(max_examples=25, deadline=None)
@given(
    busy_hosts=st.dictionaries(
        st.integers(0, 7), st.tuples(st.sampled_from([4, 8]), st.integers(0, 48)), min_size=5, max_size=8
    ),
    pods=st.integers(1, 4),
    level=st.sampled_from([BLOCK, RACK]),
)
def test_preemption_frees_one_domain_or_nothing(busy_hosts, pods, level):
    """Whatever the background: evictions happen only when the whole gang is then bound, inside one domain of its
    level, and only pods of lower priority go."""
    fabric = nodes(2, 2, 2)
    docs = [*PRIORITIES, topology(BLOCK, RACK, HOST), *fabric]
    for i, (gpus, hours) in sorted(busy_hosts.items()):
        docs.append(
            low(f"x{i}", fabric[i]["metadata"]["name"], f"2026-01-0{1 + hours // 24}T{hours % 24:02}:00:00Z", gpus)
        )
    docs.append(high_job("g", pods, **{REQUIRED: level}))
    results = start(*docs).schedule()
    evicted = [p for r in results for p in r.preempted]
    placed = [r.node for r in by_rank(results)]
    assert all(placed) or not any(placed)
    if evicted:
        assert all(placed)
        assert all(p.priority < 1000 for p in evicted)
    if all(placed):
        depth = 1 if level == BLOCK else 2
        domains = {"-".join(n.split("-")[:depth]) for n in placed}
        assert len(domains) == 1
        hosts = [fabric[int(p.name[1:])]["metadata"]["name"] for p in evicted]
        assert {"-".join(h.split("-")[:depth]) for h in hosts} <= domains  # what is freed is the gang's domain


def test_explain_lists_what_each_domain_holds_and_every_node():
    from accelsched.explain import explain_pod

    docs = [topology(BLOCK, RACK, HOST), *nodes(2, 2, 2)]
    docs += [busy("x0", "b0-r0-h0"), busy("x1", "b1-r0-h0"), busy("x2", "b1-r1-h0")]
    docs.append(job("train", 4, **{REQUIRED: BLOCK, SLICE: RACK, SLICE_SIZE: "2"}))
    session = start(*docs)
    pod = next(p for p in session.inputs.pending if p.labels.get("batch.kubernetes.io/job-completion-index") == "0")
    explained = explain_pod(session, pod.key)
    assert explained.notes[:2] == [
        "cloud.provider.com/topology-block b0: 1 of 2 slices of 2 fit; 1 of 4 nodes take none",
        "cloud.provider.com/topology-block b1: 0 of 2 slices of 2 fit; 2 of 4 nodes take none",
    ]
    assert len(explained.nodes) == 8  # every node's own verdict for the member, though no domain was tried
    assert {v.node for v in explained.nodes if not v.feasible} == {"b0-r0-h0", "b1-r0-h0", "b1-r1-h0"}
