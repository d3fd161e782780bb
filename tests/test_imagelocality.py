"""ImageLocality as kube-scheduler v1.36.3: scores from node.status.images, in Go's integer arithmetic.

The table is image_locality_test.go's TestImageLocalityPriority with its expected scores; the rest pins the
spread scaling, name normalization, the node-local score cache and the default profile's weight.
"""

from __future__ import annotations

import numpy as np
import pytest
from builders import config, node, pod, run, session

from accelsched.api.objects import normalized_image_name, parse_node, parse_pod
from accelsched.errors import InputError
from accelsched.framework.interface import CycleState
from accelsched.plugins import imagelocality
from accelsched.plugins.registry import DEFAULT_PLUGINS

MB = 1024 * 1024


def imaged(name: str, images: dict[tuple[str, ...], int], **kw) -> dict:
    """A node whose status.images lists ``{names: size in MB}``."""
    doc = node(name, **kw)
    doc["status"]["images"] = [{"names": list(names), "sizeBytes": size * MB} for names, size in images.items()]
    return doc


def spec_pod(containers: list[str], init: list[str] = (), volumes: list[str] = ()) -> dict:
    doc = pod("p", containers=[{"name": f"c{i}", "image": img} for i, img in enumerate(containers)])
    if init:
        doc["spec"]["initContainers"] = [{"name": f"i{i}", "image": img} for i, img in enumerate(init)]
    if volumes:
        doc["spec"]["volumes"] = [{"name": f"v{i}", "image": {"reference": r}} for i, r in enumerate(volumes)]
    return doc


N403002000 = {("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"): 40, ("gcr.io/300:latest", "gcr.io/300:v1"): 300,
              ("gcr.io/2000:latest",): 2000}  # fmt: skip
N25010 = {("gcr.io/250:latest",): 250, ("gcr.io/10:latest", "gcr.io/10:v1"): 10}
N60040900 = {("gcr.io/600:latest",): 600, ("gcr.io/40:latest",): 40, ("gcr.io/900:latest",): 900}
N300600900 = {("gcr.io/300:latest",): 300, ("gcr.io/600:latest",): 600, ("gcr.io/900:latest",): 900}
N400030 = {("gcr.io/4000:latest",): 4000, ("gcr.io/30:latest",): 30}
N203040 = {("gcr.io/20:latest",): 20, ("gcr.io/30:latest",): 30, ("gcr.io/40:latest",): 40}
EMPTY: dict = {}

GO_CASES = [
    ("two images spread on two nodes", spec_pod(["gcr.io/40", "gcr.io/250"]), [N403002000, N25010], [0, 5]),
    ("two images on one node", spec_pod(["gcr.io/40", "gcr.io/300"]), [N403002000, N25010], [7, 0]),
    ("if exceed limit, use limit", spec_pod(["gcr.io/10", "gcr.io/4000"]), [N400030, N25010], [100, 0]),
    ("limit with a node without images", spec_pod(["gcr.io/10", "gcr.io/4000"]), [N400030, N25010, EMPTY], [66, 0, 0]),
    ("multiple large images", spec_pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]), [N60040900, N300600900, EMPTY],
     [32, 36, 0]),
    ("multiple small images", spec_pod(["gcr.io/30", "gcr.io/40"]), [N203040, N400030], [1, 0]),
    ("image volume", spec_pod(["gcr.io/30"], volumes=["gcr.io/300"]), [N300600900, N400030], [12, 0]),
    ("init containers", spec_pod(["gcr.io/30"], init=["gcr.io/300"]), [N403002000, N203040], [6, 0]),
]  # fmt: skip


def scores(doc: dict, node_images: list[dict]) -> list[int]:
    s = session([imaged(f"node{i + 1}", images) for i, images in enumerate(node_images)], [])
    plugin = imagelocality.new({}, None)
    result = plugin.score(CycleState(), parse_pod(doc), s.cluster, np.arange(s.cluster.n))
    return [result] * s.cluster.n if isinstance(result, int) else result.tolist()


@pytest.mark.parametrize(("case", "doc", "node_images", "expected"), GO_CASES, ids=[c[0] for c in GO_CASES])
def test_scores_match_kube_schedulers_own_table(case, doc, node_images, expected) -> None:
    assert scores(doc, node_images) == expected


def test_the_scalar_and_vectorized_paths_agree() -> None:
    """NodeScore.compute_one (a bind's one-node update) equals compute over all nodes."""
    s = session([imaged("a", N60040900), imaged("b", N300600900), imaged("c", EMPTY)], [])
    doc = parse_pod(spec_pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]))
    spec = imagelocality.new({}, None).node_score(CycleState(), doc, s.cluster)
    assert [spec.compute_one(i) for i in range(3)] == spec.compute(np.arange(3)).tolist() == [32, 36, 0]


def test_spread_scaling_truncates_as_go_does() -> None:
    """scaledImageScore: int64(float64(size) * float64(numNodes)/float64(totalNumNodes)); 1 of 3 nodes."""
    size = 1_000_000_007
    s = session([imaged("a", {("img:1",): 1}), node("b"), node("c")], [])
    s.cluster._images["img:1"] = (size, [0])  # an odd size, so the float scaling must truncate
    assert s.cluster.scaled_image_score("img:1") == int(float(size) * (1 / 3)) == 333_333_335


def test_the_size_is_the_first_listing_nodes() -> None:
    """The scheduler cache keeps one ImageStateSummary per name, sized by the first node that listed it."""
    s = session([imaged("a", {("img:1",): 500}), imaged("b", {("img:1",): 100})], [])
    assert s.cluster.scaled_image_score("img:1") == 500 * MB


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.27", "nginx:1.27"),
        ("registry:5000/team/app", "registry:5000/team/app:latest"),
        ("registry:5000/team/app:v2", "registry:5000/team/app:v2"),
        ("app@sha256:abcd", "app@sha256:abcd"),
    ],
)
def test_image_names_are_normalized_as_kube_scheduler_does(name, normalized) -> None:
    assert normalized_image_name(name) == normalized


def test_nodes_without_images_give_a_constant_score() -> None:
    """No node lists any image (the common input): the plugin cannot tell nodes apart and is skipped."""
    s = session([node("a"), node("b")], [])
    plugin = imagelocality.new({}, None)
    assert plugin.node_score(CycleState(), parse_pod(pod("p")), s.cluster) == 0
    assert scores(spec_pod(["busybox"]), [N25010, EMPTY]) == [0, 0]


def test_the_node_holding_a_large_image_wins_a_tie() -> None:
    """Weight 1 in the default profile, right after NodeResourcesBalancedAllocation: otherwise equal nodes are
    decided by the image."""
    names = [n for n, _ in DEFAULT_PLUGINS]
    assert names.index("ImageLocality") == names.index("NodeResourcesBalancedAllocation") + 1
    assert dict(DEFAULT_PLUGINS)["ImageLocality"] == 1
    nodes = [imaged(f"n{i}", {}) for i in range(4)] + [imaged("cached", {("trainer:v1",): 800})]
    doc = pod("job", containers=[{"name": "t", "image": "trainer:v1", "resources": {"requests": {"cpu": "1"}}}])
    for seed in range(5):
        assert run(nodes, [doc], seed=seed)["job"].node == "cached"


def test_the_score_shows_in_explain_and_can_be_weighted() -> None:
    cfg = config(plugins={"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 5}]}})
    assert cfg.profiles["default-scheduler"].weights["ImageLocality"] == 5
    s = session([imaged("a", {("trainer:v1",): 800}), node("b")], [], config=cfg)
    plugin = next(p for p in s.scheduler.config.profiles["default-scheduler"].at("score") if p.name == "ImageLocality")
    doc = parse_pod(pod("job", containers=[{"name": "t", "image": "trainer:v1"}]))
    assert plugin.score(CycleState(), doc, s.cluster, np.arange(2)).tolist() == [
        imagelocality.calculate_priority(int(800 * MB * 0.5), 1),
        0,
    ]


def test_a_negative_image_size_is_bad_input() -> None:
    doc = imaged("a", {("x",): 1})
    doc["status"]["images"][0]["sizeBytes"] = -1
    with pytest.raises(InputError) as err:
        parse_node(doc, "nodes.yaml")
    assert err.value.field == "status.images[0].sizeBytes"
