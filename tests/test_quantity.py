"""Resource quantities and a pod's effective request, as Kubernetes computes them.

Kubernetes sources:
- staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go: the grammar
  ``<signedNumber><suffix>`` with binary SI (Ki, Mi, Gi, Ti, Pi, Ei), decimal SI (n, u, m, "", k, M, G, T, P, E)
  or a decimal exponent (e<int>, E<int>); ``MilliValue()``/``Value()`` round up, so 0.1m cpu reserves 1m.
- pkg/apis/core/validation/validation.go: quantities must be >= 0; extended resources (a domain outside
  kubernetes.io) must be whole numbers and requests must equal limits.
- pkg/apis/core/v1/defaults.go: a container's limits stand in for requests it does not set.
- staging/src/k8s.io/component-helpers/resource/helpers.go, ``PodRequests``: max(sum of app containers plus
  restartable (sidecar) init containers, each init container plus the sidecars started before it) + overhead.
"""

from __future__ import annotations

import pytest
from builders import ACCEL, container, node, pod, run

from accelsched.api import objects, quantity
from accelsched.errors import InputError

GI = 2**30


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", "2", 2000),
        ("cpu", "1e3", 1_000_000),  # 1000 cores, in millicores
        ("cpu", "1E3", 1_000_000),
        ("cpu", "0.1m", 1),  # rounds up to the smallest unit
        ("cpu", "1n", 1),
        ("cpu", "100u", 1),
        ("cpu", ".5", 500),
        ("cpu", "5.", 5000),
        ("cpu", "+1", 1000),
        ("cpu", "0", 0),
        ("memory", "2Gi", 2 * GI),
        ("memory", "1.5Gi", 3 * GI // 2),
        ("memory", "1G", 1_000_000_000),
        ("memory", "1M", 1_000_000),
        ("memory", "1k", 1000),
        ("memory", "1Ki", 1024),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129_000_000),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "1E", 10**18),  # a lone E is exa, not an exponent
        ("memory", "1e-3", 1),  # a milli-byte still takes a byte
        ("memory", "1m", 1),
        ("pods", "110", 110),
        (ACCEL, "4", 4),
        (ACCEL, "4.0", 4),  # whole, even written with a decimal point
        (ACCEL, "1k", 1000),
    ],
)
def test_valid_quantities(name: str, text: str, expected: int) -> None:
    assert quantity.parse(name, text) == expected


@pytest.mark.parametrize(("value", "expected"), [(2, 2000), (0.5, 500), (0.0001, 1)])
def test_yaml_numbers(value: float, expected: int) -> None:
    """YAML gives ints and floats for bare numbers: they follow the same rules."""
    assert quantity.parse("cpu", value) == expected


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cpu", "1.5.5"),
        ("cpu", "abc"),
        ("cpu", ""),
        ("cpu", "-1"),
        ("memory", "-1Gi"),
        ("cpu", "1 Gi"),  # no spaces inside a quantity
        ("memory", "1K"),  # kilo is a lower-case k; K only exists as Ki
        ("memory", "1gi"),
        ("memory", "1_000"),
        ("memory", "1e3Gi"),  # one suffix only
        ("memory", "1e"),
        ("memory", "1.5e3m"),
        ("memory", "0x10"),
        ("cpu", "Infinity"),
        ("cpu", "NaN"),
        ("cpu", True),
        ("cpu", None),
        (ACCEL, "1.5"),  # extended resources are whole numbers
        (ACCEL, "500m"),
        ("pods", "1.5"),
    ],
)
def test_invalid_quantities(name: str, text: object) -> None:
    with pytest.raises(ValueError):
        quantity.parse(name, text)


def test_huge_quantity_is_an_error_not_a_crash() -> None:
    """A value that does not fit the int64 columns is refused at the edge with a clear error."""
    with pytest.raises(ValueError, match="too large"):
        quantity.parse("memory", "1e30")
    with pytest.raises(InputError, match=r"status\.capacity\[memory\]: .*too large"):
        objects.parse_node(node("n", memory="1e30"))


def test_invalid_quantity_in_a_pod_names_the_field() -> None:
    with pytest.raises(InputError) as exc:
        objects.parse_pod(pod("p", extra={ACCEL: "1.5"}))
    assert f"spec.containers[0].resources.requests[{ACCEL}]" in str(exc.value) or (
        f"spec.containers[0].resources.limits[{ACCEL}]" in str(exc.value)
    )
    with pytest.raises(InputError, match=r"spec\.containers\[0\]\.resources\.requests\[cpu\]"):
        objects.parse_pod(pod("p", cpu="1.5.5"))
    with pytest.raises(InputError, match=r"spec\.containers\[0\]\.resources\.requests\[cpu\]"):
        objects.parse_pod(pod("p", cpu="-1"))


def test_format_round_trip() -> None:
    for name, text in (("cpu", "3500m"), ("cpu", "4"), ("memory", "64Gi"), (ACCEL, "8")):
        assert quantity.format_quantity(name, quantity.parse(name, text)) == text


# ---------------------------------------------------------------------------------------- effective request


def requests_of(**spec: object) -> dict[str, int]:
    return objects.parse_pod(pod("p", **spec)).requests  # type: ignore[arg-type]


def test_app_containers_are_summed() -> None:
    got = requests_of(
        containers=[
            container("a", requests={"cpu": "1", "memory": "1Gi"}),
            container("b", requests={"cpu": "500m", "memory": "512Mi"}),
        ]
    )
    assert got == {"cpu": 1500, "memory": GI + GI // 2}


def test_init_containers_take_the_max_not_the_sum() -> None:
    got = requests_of(
        containers=[container("a", requests={"cpu": "1", "memory": "1Gi"})],
        init_containers=[
            container("i1", requests={"cpu": "2", "memory": "256Mi"}),
            container("i2", requests={"cpu": "500m", "memory": "512Mi"}),
        ],
    )
    # cpu: max(1, max(2, 0.5)) = 2; memory: max(1Gi, max(256Mi, 512Mi)) = 1Gi
    assert got == {"cpu": 2000, "memory": GI}


def test_overhead_is_added_on_top() -> None:
    got = requests_of(
        containers=[container("a", requests={"cpu": "1"})],
        init_containers=[container("i", requests={"cpu": "3"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    assert got == {"cpu": 3250, "memory": 120 * 2**20}


def test_sidecars_add_to_the_sum_and_to_later_init_containers() -> None:
    """KEP-753: a restartable init container keeps running, so it adds to the app containers and to every
    regular init container started after it, but not to those started before it."""
    got = requests_of(
        containers=[container("app", requests={"cpu": "1"})],
        init_containers=[
            container("before", requests={"cpu": "2500m"}),  # runs alone: 2.5
            container("sidecar1", restart_policy="Always", requests={"cpu": "1"}),
            container("init", requests={"cpu": "5"}),  # runs next to sidecar1: 6
            container("sidecar2", restart_policy="Always", requests={"cpu": "2"}),
        ],
    )
    # app + sidecars = 1 + 1 + 2 = 4; init peak = 1 + 5 = 6 (a plain max of init containers would say 5)
    assert got == {"cpu": 6000}
    only_sidecars = requests_of(
        containers=[container("app", requests={"cpu": "1"})],
        init_containers=[
            container("before", requests={"cpu": "2500m"}),
            container("sidecar", restart_policy="Always", requests={"cpu": "2"}),
        ],
    )
    assert only_sidecars == {"cpu": 3000}  # app + sidecar = 3 beats the lone init container's 2.5


def test_scoring_fills_in_the_default_request_per_container_missing_one() -> None:
    """PodInfo.CalculateResource's Non0CPU/Non0Mem (framework/types.go, NonMissingContainerRequests): each container
    without a cpu or memory request counts 100m / 200Mi, one that asks for 0 counts 0; init containers and
    sidecars combine as for requests. A pod-level default (the sum, or 200Mi for a pod asking none) differs."""
    mi = 2**20

    def nonzero(**spec: object) -> tuple[int, int] | None:
        return objects.parse_pod(pod("p", **spec)).nonzero  # type: ignore[arg-type]

    two = [container("main", requests={"cpu": "1500m", "memory": "128Mi"}), container("side", requests={"cpu": "100m"})]
    assert nonzero(containers=two) == (1600, 328 * mi)
    assert nonzero(containers=[container("a"), container("b")]) == (200, 400 * mi)
    assert nonzero(containers=[container("a", requests={"cpu": "0", "memory": "0"})]) == (0, 0)
    with_init = nonzero(
        containers=[container("app", requests={"cpu": "1"})],
        init_containers=[
            container("sidecar", restart_policy="Always", requests={"memory": "1Gi"}),
            container("init", requests={"cpu": "3"}),
        ],
    )
    # app + sidecar = (1000 + 100, 200Mi + 1Gi); the init container beside the sidecar = (3000 + 100, 200Mi + 1Gi)
    assert with_init == (3100, 200 * mi + GI)


def test_limits_stand_in_for_missing_requests() -> None:
    got = requests_of(
        containers=[
            container("a", limits={"cpu": "2", "memory": "1Gi"}),
            container("b", requests={"memory": "256Mi"}, limits={"cpu": "1", "memory": "1Gi"}),
        ]
    )
    assert got == {"cpu": 3000, "memory": GI + 256 * 2**20}


def test_extended_resource_from_limits() -> None:
    got = requests_of(containers=[container("a", limits={ACCEL: "2"})])
    assert got == {ACCEL: 2}


def test_extended_request_must_equal_limit() -> None:
    with pytest.raises(InputError, match="equal"):
        requests_of(containers=[container("a", requests={ACCEL: "1"}, limits={ACCEL: "2"})])


def test_request_above_limit_is_invalid() -> None:
    with pytest.raises(InputError, match="limit"):
        requests_of(containers=[container("a", requests={"cpu": "2"}, limits={"cpu": "1"})])


def test_no_requests_means_no_requests() -> None:
    assert requests_of(containers=[container("a")]) == {}


def test_effective_request_is_what_the_scheduler_fits() -> None:
    """The init container's 3 cpu (not the app's 1) decides: a 2-cpu node cannot take the pod."""
    p = pod(
        "p",
        containers=[container("app", requests={"cpu": "1"})],
        init_containers=[container("init", requests={"cpu": "3"})],
    )
    results = run([node("small", cpu="2"), node("big", cpu="4")], [p])
    assert results["p"].node == "big"
    results = run([node("small", cpu="2")], [p])
    assert results["p"].node is None
    assert results["p"].message.startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_millicore_rounding_is_what_the_scheduler_fits() -> None:
    """0.1m rounds up to 1m: a node with exactly 1000m free takes ten 100m pods, not an eleventh 0.1m one."""
    pods = [pod(f"p{i}", cpu="100m") for i in range(10)] + [pod("tiny", cpu="0.1m")]
    results = run([node("n", cpu="1")], pods)
    assert all(results[f"p{i}"].node == "n" for i in range(10))
    assert results["tiny"].node is None
