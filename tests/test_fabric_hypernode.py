"""Volcano's HyperNode tree as topology levels: read from the document stream (kind HyperNode), checked as its CRD
and webhook check it (exit 2, file, object and field named), turned into one label per tier, and asked for by a
Volcano PodGroup's networkTopology (hard: a tier required; soft: the lowest tier preferred) or by Kueue's podset
annotations naming a tier's label."""

from __future__ import annotations

import pytest
import yaml
from builders import start
from click.testing import CliRunner
from test_fabric_gangs import GPU, REQUIRED, busy, by_rank, job

from accelsched.api.loader import Document, build_inputs
from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.fabric import hypernode

TIER1, TIER2 = hypernode.tier_key(1), hypernode.tier_key(2)


def node(name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}},
    }


def hypernode_doc(name: str, tier: int, *members: dict) -> dict:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": list(members)},
    }


def member(type_: str, **selector) -> dict:
    return {"type": type_, "selector": selector}


def fabric() -> list[dict]:
    """Two leaf switches of 4 nodes under one spine: s0 by a name pattern, s1 by a rack label; the spine names s0
    exactly and s1 by pattern. Node n8 belongs to no HyperNode."""
    docs = [node(f"n{i}", rack="r0" if i < 4 else "r1") for i in range(8)] + [node("n8")]
    docs.append(hypernode_doc("s0", 1, member("Node", regexMatch={"pattern": "^n[0-3]$"})))
    docs.append(hypernode_doc("s1", 1, member("Node", labelMatch={"matchLabels": {"rack": "r1"}})))
    docs.append(
        hypernode_doc(
            "spine",
            2,
            member("HyperNode", exactMatch={"name": "s0"}),
            member("HyperNode", regexMatch={"pattern": "^s1$"}),
        )
    )
    return docs


def volcano_group(name: str, min_member: int, **network_topology) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "networkTopology": network_topology},
    }


def read(*docs: dict):
    return build_inputs([Document(d, "fabric.yaml", d["kind"]) for d in docs])


def test_the_tree_becomes_one_label_per_tier_and_a_topology_widest_first():
    inputs = read(*fabric())
    labels = {n.name: n.labels for n in inputs.nodes}
    assert [labels[f"n{i}"][TIER1] for i in range(8)] == ["s0"] * 4 + ["s1"] * 4
    assert {labels[f"n{i}"][TIER2] for i in range(8)} == {"spine"}
    assert TIER1 not in labels["n8"] and TIER2 not in labels["n8"]  # in no HyperNode: outside the tree
    (topology,) = [t for t in inputs.topologies if t.name == hypernode.TOPOLOGY]
    assert topology.levels == (TIER2, TIER1)


def test_a_leaf_without_a_parent_stands_alone_at_the_tiers_above_it():
    docs = [*fabric(), node("m0"), hypernode_doc("s2", 1, member("Node", exactMatch={"name": "m0"}))]
    labels = {n.name: n.labels for n in read(*docs).nodes}
    assert labels["m0"][TIER1] == "s2" and labels["m0"][TIER2] == "s2"  # its own domain at tier 2


def test_hard_mode_keeps_the_gang_in_one_hypernode_of_the_allowed_tier():
    # s0 has 2 hosts busy: a gang of 3 fits only s1 at tier 1.
    docs = [*fabric(), busy("x0", "n0"), busy("x1", "n1")]
    docs += [volcano_group("train", 3, mode="hard", highestTierAllowed=1), job("train", 3)]
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert all(placed) and set(placed) <= {"n4", "n5", "n6", "n7"}


def test_hard_mode_binds_nothing_when_no_hypernode_of_the_tier_holds_the_gang():
    docs = [*fabric(), volcano_group("train", 5, mode="hard", highestTierAllowed=1), job("train", 5)]
    results = by_rank(start(*docs).schedule())
    assert not any(r.node for r in results)
    assert f'topology "{hypernode.TOPOLOGY}" allows to fit only 4 out of 5 pod(s)' in results[0].message


def test_soft_mode_prefers_the_lowest_tier_and_crosses_it_when_it_must():
    docs = [*fabric(), volcano_group("train", 5, mode="soft"), job("train", 5)]
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert all(placed) and "n8" not in placed
    assert sorted({p in ("n0", "n1", "n2", "n3") for p in placed}) == [False, True]  # both leaves, one spine
    docs = [*fabric(), volcano_group("small", 3, mode="soft"), job("small", 3)]
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert len({p in ("n0", "n1", "n2", "n3") for p in placed}) == 1  # fits one leaf: kept there


def test_kueue_annotations_can_name_a_hypernode_tier():
    docs = [*fabric(), busy("x0", "n4"), job("train", 3, **{REQUIRED: TIER1})]
    placed = [r.node for r in by_rank(start(*docs).schedule())]
    assert all(placed) and set(placed) <= {"n5", "n6", "n7"}  # the tightest leaf that holds it: s1 (3 free)


BAD = [
    (lambda d: d["spec"].pop("tier"), "spec.tier: Required value"),
    (lambda d: d["spec"].update(tier=-1), "spec.tier: Invalid value: -1: spec.tier in body should be greater"),
    (lambda d: d["spec"].update(tier="1"), 'spec.tier: Invalid value: "1": spec.tier must be of type integer'),
    (lambda d: d["spec"].update(members=[]), "spec.members: Invalid value: 0"),
    (lambda d: d["spec"]["members"][0].update(type="Rack"), 'spec.members[0].type: Unsupported value: "Rack"'),
    (
        lambda d: d["spec"]["members"][0].update(selector={}),
        f'spec.members[0].selector: Invalid value: "object": {hypernode.NO_SELECTOR}',
    ),
    (
        lambda d: d["spec"]["members"][0]["selector"].update(exactMatch={"name": "n0"}),
        f'spec.members[0].selector: Invalid value: "object": {hypernode.TWO_SELECTORS}',
    ),
    (
        lambda d: d["spec"]["members"][0].update(selector={"regexMatch": {"pattern": "(n"}}),
        'spec.members[0].selector.regexMatch.pattern: Invalid value: "(n": member regexMatch pattern is invalid',
    ),
    (
        lambda d: d["spec"]["members"][0].update(selector={"exactMatch": {"name": "N_0"}}),
        'spec.members[0].selector.exactMatch.name: Invalid value: "N_0": spec.members[0].selector.exactMatch.name '
        "in body should match",
    ),
    (
        lambda d: d["spec"]["members"][0].update(type="HyperNode", selector={"labelMatch": {"matchLabels": {}}}),
        "labelMatch takes effect only for members of type Node",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_bad_hypernode_is_refused_naming_file_object_and_field(change, message):
    docs = fabric()
    change(docs[-3])  # s0
    with pytest.raises(InputError) as err:
        read(*docs)
    assert str(err.value).startswith("fabric.yaml: HyperNode s0: ") and message in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("docs", "message"),
    [
        (
            [hypernode_doc("spine", 2, member("HyperNode", exactMatch={"name": "s9"}))],
            "HyperNode spine: spec.members[0].selector.exactMatch.name: no HyperNode named 's9'",
        ),
        (
            [
                hypernode_doc("s0", 1, member("Node", exactMatch={"name": "n0"})),
                hypernode_doc("up", 1, member("HyperNode", exactMatch={"name": "s0"})),
            ],
            "HyperNode up: spec.members[0]: HyperNode s0 has tier 1: a member must be of a lower tier than 1",
        ),
        (
            [
                hypernode_doc("a", 1, member("Node", exactMatch={"name": "n0"})),
                hypernode_doc("b", 1, member("Node", regexMatch={"pattern": "n"})),
            ],
            "HyperNode b: spec.members[0]: Node n0 is already a member of HyperNode a",
        ),
    ],
)
def test_a_broken_tree_is_refused(docs, message):
    with pytest.raises(InputError) as err:
        read(node("n0"), *docs)
    assert message in str(err.value)


def test_bad_network_topology_and_cli_exit_2(tmp_path):
    with pytest.raises(InputError, match=r'spec.networkTopology.mode: Unsupported value: "strict"'):
        read(*fabric(), volcano_group("g", 2, mode="strict"))
    with pytest.raises(InputError, match=r"spec\.networkTopology\.highestTierAllowed: Invalid value: -1"):
        read(*fabric(), volcano_group("g", 2, highestTierAllowed=-1))
    docs = fabric()
    docs[-3]["spec"]["tier"] = "one"
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path)])
    assert result.exit_code == 2
    assert f'{path}: HyperNode s0: spec.tier: Invalid value: "one"' in result.output


def test_hard_mode_without_a_tier_keeps_the_gang_in_one_top_hypernode():
    # A second spine over a one-node leaf: 5 pods fit only the first spine (8 nodes), not spine2 (1 node).
    docs = [*fabric(), node("m0"), hypernode_doc("s9", 1, member("Node", exactMatch={"name": "m0"}))]
    docs.append(hypernode_doc("spine2", 2, member("HyperNode", exactMatch={"name": "s9"})))
    group = volcano_group("train", 5, mode="hard")
    placed = [r.node for r in by_rank(start(*docs, group, job("train", 5)).schedule())]
    assert all(placed) and set(placed) <= {f"n{i}" for i in range(8)}
    inputs = read(*docs, group)
    assert inputs.pod_groups["default/train"].required_topology == TIER2


def test_a_changed_hypernode_relabels_the_nodes_it_left():
    # As a live stream does: the same inputs read again with s0 now holding n0 and n1 only.
    inputs = read(*fabric())
    smaller = hypernode_doc("s0", 1, member("Node", regexMatch={"pattern": "^n[01]$"}))
    inputs = build_inputs([Document(smaller, "update.yaml", "HyperNode")], base=inputs)
    labels = {n.name: n.labels for n in inputs.nodes}
    assert labels["n1"][TIER1] == "s0" and TIER1 not in labels["n2"] and TIER2 not in labels["n2"]
