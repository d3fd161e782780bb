"""The upstream gang API offline (scheduling.k8s.io/v1alpha2): the same messages as the real kube-scheduler gave
in tests/live/test_live_workload_gangs.py, and the API server's checks as bad input."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from accelsched.engine import schedule
from accelsched.errors import InputError
from accelsched.framework import gang

NODE = {
    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
    "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
}


def _write(tmp_path: Path, docs: list[dict]) -> Path:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _pod(name: str, group: str, cpu: str) -> dict:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulingGroup": {"podGroupName": group}, "containers": [container]}}  # fmt: skip


def _group(name: str, policy: dict) -> dict:
    return {"apiVersion": gang.WORKLOAD_API, "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": policy}}  # fmt: skip


def _scenario() -> list[dict]:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}, "status": NODE} for i in range(2)]
    template = {"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}}
    workload = {"apiVersion": gang.WORKLOAD_API, "kind": "Workload", "metadata": {"name": "w"},
                "spec": {"podGroupTemplates": [template]}}  # fmt: skip
    groups = [_group("fit", {"gang": {"minCount": 2}}), _group("nofit", {"gang": {"minCount": 3}}),
              _group("few", {"gang": {"minCount": 3}}), _group("solo", {"basic": {}})]  # fmt: skip
    pods = [_pod(f"fit-{i}", "fit", "1") for i in range(2)] + [_pod(f"nofit-{i}", "nofit", "3") for i in range(3)]
    pods += [_pod("few-0", "few", "1"), _pod("missing-0", "nope", "1"), _pod("solo-0", "solo", "1")]
    return [*nodes, workload, *groups, *pods]


def test_upstream_gangs_all_or_nothing_with_kube_scheduler_wording(tmp_path: Path) -> None:
    _, results = schedule([_write(tmp_path, _scenario())])
    by_name = {r.pod.name: r for r in results}
    assert sorted(n for n, r in by_name.items() if r.scheduled) == ["fit-0", "fit-1", "solo-0"]
    assert by_name["missing-0"].message == 'waiting for pods\'s pod group "nope" to appear in scheduling queue'
    assert by_name["few-0"].message == "waiting for minCount pods from a gang to appear in scheduling queue"
    fit_error = (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod."
    )  # recorded from the real kube-scheduler v1.36.3
    assert Counter(by_name[f"nofit-{i}"].message for i in range(3)) == {gang.FEASIBLE_MEMBER: 2, fit_error: 1}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda d: d[4]["spec"].update(schedulingPolicy={"gang": {"minCount": 0}}),
            "spec.schedulingPolicy.gang.minCount",
        ),
        (
            lambda d: d[4]["spec"].update(schedulingPolicy={"basic": {}, "gang": {"minCount": 1}}),
            "spec.schedulingPolicy",
        ),
        (
            lambda d: d[-1]["spec"].update(schedulingGroup={"podGroupName": "Bad_Name"}),
            "spec.schedulingGroup.podGroupName",
        ),
        (lambda d: d[2]["spec"].update(podGroupTemplates=[]), "spec.podGroupTemplates"),
    ],
)
def test_what_the_api_server_refuses_is_bad_input(tmp_path: Path, mutate, field: str) -> None:
    docs = _scenario()
    mutate(docs)
    with pytest.raises(InputError) as info:
        schedule([_write(tmp_path, docs)])
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (
            lambda d: d[4]["spec"].update(schedulingConstraints={"topology": [{"key": "Not A Label!!"}]}),
            "spec.schedulingConstraints.topology[0].key",
            'Invalid value: "Not A Label!!": name part must consist of alphanumeric characters',
        ),
        (
            lambda d: d[4]["spec"].update(schedulingConstraints={"topology": [{"key": "zone"}, {"key": "a/b/c"}]}),
            "spec.schedulingConstraints.topology[1].key",
            "a valid label key",
        ),
        (
            lambda d: d[2]["spec"]["podGroupTemplates"][0].update(name="Bad Name"),
            "spec.podGroupTemplates[0].name",
            'Invalid value: "Bad Name": a lowercase RFC 1123 label',
        ),
        (
            lambda d: d[4]["spec"].update(
                podGroupTemplateRef={"workload": {"workloadName": "Bad Name!", "podGroupTemplateName": "t"}}
            ),
            "spec.podGroupTemplateRef.workload.workloadName",
            'Invalid value: "Bad Name!": a lowercase RFC 1123 subdomain',
        ),
        (
            lambda d: d[4]["spec"].update(
                podGroupTemplateRef={"workload": {"workloadName": "w", "podGroupTemplateName": "T.x"}}
            ),
            "spec.podGroupTemplateRef.workload.podGroupTemplateName",
            "a lowercase RFC 1123 label",
        ),
    ],
)
def test_round3_names_and_keys_the_api_server_refuses(tmp_path: Path, mutate, field: str, words: str) -> None:
    """Issue 28: accepted though the API server refuses them (declarative validation of scheduling/v1alpha2:
    TopologyConstraint.key is a label key, template names DNS labels, workloadName a DNS subdomain)."""
    docs = _scenario()
    mutate(docs)
    with pytest.raises(InputError) as info:
        schedule([_write(tmp_path, docs)])
    assert info.value.field == field and words in info.value.message, str(info.value)


@pytest.mark.parametrize("annotation", [gang.REQUIRED_TOPOLOGY, gang.PREFERRED_TOPOLOGY])
def test_topology_annotation_names_a_label_key(tmp_path: Path, annotation: str) -> None:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default", "annotations": {annotation: "Bad Key!!"}},
             "spec": {"minMember": 1}}  # fmt: skip
    with pytest.raises(InputError) as info:
        schedule([_write(tmp_path, [group])])
    assert info.value.field == f"metadata.annotations[{annotation}]"
    assert info.value.message.startswith('Invalid value: "Bad Key!!": name part must consist of')


def test_pod_groups_of_two_api_groups_with_one_name_are_two_objects_and_two_gangs(tmp_path: Path) -> None:
    """Issue 28: an object's identity is its API group, kind, namespace and name. A scheduling.x-k8s.io PodGroup g
    (minMember 2, label members) and a scheduling.k8s.io PodGroup g (minCount 3, schedulingGroup members) in one
    namespace: no duplicate; each gang is decided by its own group."""
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}, "status": NODE} for i in range(2)]
    old = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
           "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}  # fmt: skip
    new = {**_group("g", {"gang": {"minCount": 3}}), "metadata": {"name": "g", "namespace": "default"}}
    labelled = [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"l-{i}", "namespace": "default", "labels": {gang.POD_GROUP_LABEL: "g"}},
         "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
        for i in range(2)
    ]  # fmt: skip
    upstream = [_pod(f"u-{i}", "g", "1") for i in range(2)]
    _, results = schedule([_write(tmp_path, [*nodes, old, new, *labelled, *upstream])])
    by_name = {r.pod.name: r for r in results}
    assert by_name["l-0"].scheduled and by_name["l-1"].scheduled  # minMember 2 of the scheduler-plugins group
    for name in ("u-0", "u-1"):  # 2 of minCount 3: GangScheduling's PreEnqueue holds them
        assert by_name[name].message == gang.TOO_FEW_PODS
    with pytest.raises(InputError, match="duplicate object"):
        schedule([_write(tmp_path, [*nodes, old, old])])


def test_an_upstream_gang_is_listed_pending_under_its_own_namespace_and_name(tmp_path: Path) -> None:
    """Its key carries the API group (``scheduling.k8s.io/default/nofit``); the page's Pending list and live mode's
    PodGroup condition writes read the namespace and name back from it (gang.key_parts), not by splitting at "/"."""
    from accelsched.ui import view
    from accelsched.ui.state import FilesState, execute

    assert gang.key_parts(gang.pod_group_key("default", "g", True)) == ("default", "g")
    assert gang.key_parts(gang.pod_group_key("default", "g", False)) == ("default", "g")
    run = execute(FilesState.load([_write(tmp_path, _scenario())]))
    entries = {e["key"]: e for e in view.pending_list(run) if e["kind"] == "gang"}
    nofit = entries["scheduling.k8s.io/default/nofit"]
    assert (nofit["namespace"], nofit["name"]) == ("default", "nofit")
