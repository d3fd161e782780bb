"""The quota tree's arithmetic (Kueue's resource_node.go), Kueue's amount printing and its workload names.

Expected values are worked out by hand from the Go functions named in each test.
"""

from __future__ import annotations

import hashlib

import pytest

from accelsched.api.selectors import Taint
from accelsched.queues import quota
from accelsched.queues.api import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    QueueObjects,
    ResourceGroup,
    ResourceQuota,
)
from accelsched.queues.flavorassigner import _go_taint
from accelsched.queues.resources import format_amount, value
from accelsched.queues.workloads import JOB_GVK, POD_GVK, role_hash, workload_name

FR = ("gpu", "nvidia.com/gpu")


def _groups(nominal: int, borrowing: int | None = None, lending: int | None = None) -> tuple[ResourceGroup, ...]:
    q = ResourceQuota(FR[1], nominal, borrowing, lending)
    return (ResourceGroup((FR[1],), (FlavorQuotas(FR[0], (q,)),)),)


def _tree(*cqs: ClusterQueue, cohorts: tuple[Cohort, ...] = ()) -> quota.QuotaTree:
    objects = QueueObjects()
    objects.cluster_queues = {cq.name: cq for cq in cqs}
    objects.cohorts = {c.name: c for c in cohorts}
    return quota.build(objects)


def test_a_queue_without_a_cohort_has_its_nominal_quota_and_no_more() -> None:
    tree = _tree(ClusterQueue("a", resource_groups=_groups(4)))
    a = tree.cluster_queues["a"]
    assert (a.available(FR), a.potential_available(FR)) == (4, 4)
    a.add_usage(FR, 3)
    assert a.available(FR) == 1


def test_usage_past_the_local_quota_is_stored_in_the_cohort_and_given_back_in_order() -> None:
    """a lends all but 1 (lendingLimit 3 of 4), b lends all 4: the cohort holds 3 + 4 = 7. Using 5 in a takes its
    1 kept back first, then 4 from the cohort; b then sees 7 - 4 = 3. Removing 2 from a frees the cohort first
    (usage stored in the parent: 5 - 1 = 4, so min(2, 4) = 2 goes back)."""
    tree = _tree(
        ClusterQueue("a", cohort="c", resource_groups=_groups(4, lending=3)),
        ClusterQueue("b", cohort="c", resource_groups=_groups(4)),
    )
    a, b, c = tree.cluster_queues["a"], tree.cluster_queues["b"], tree.cohorts["c"]
    assert c.subtree[FR] == 7 and a.local_quota(FR) == 1
    assert a.potential_available(FR) == 8 and b.potential_available(FR) == 7
    a.add_usage(FR, 5)
    assert (a.usage[FR], c.usage[FR]) == (5, 4)
    assert b.available(FR) == 3
    a.remove_usage(FR, 2)
    assert (a.usage[FR], c.usage[FR]) == (3, 2)


def test_the_borrowing_limit_caps_what_the_parent_may_give() -> None:
    """available: storedInParent 4 - usedInParent 0 + borrowingLimit 1 = 5, below the cohort's 8."""
    tree = _tree(
        ClusterQueue("a", cohort="c", resource_groups=_groups(4, borrowing=1)),
        ClusterQueue("b", cohort="c", resource_groups=_groups(4)),
    )
    a = tree.cluster_queues["a"]
    assert (a.available(FR), a.potential_available(FR)) == (5, 5)


def test_hierarchical_cohorts_add_their_own_quota_and_report_how_high_a_request_borrows() -> None:
    """org (2 of its own) above team (no quota) above a (4) and b (4): the tree holds 10. A request of 6 from a
    fits in team (8), one level up: height 1; a request of 9 needs org: height 2, and org is the root, so no
    smaller subtree could be reclaimed (False)."""
    tree = _tree(
        ClusterQueue("a", cohort="team", resource_groups=_groups(4)),
        ClusterQueue("b", cohort="team", resource_groups=_groups(4)),
        cohorts=(Cohort("team", parent="org"), Cohort("org", resource_groups=_groups(2))),
    )
    a = tree.cluster_queues["a"]
    assert tree.cohorts["org"].subtree[FR] == 10 and a.potential_available(FR) == 10
    assert tree.height_of_lowest_subtree_that_fits(a, FR, 3) == (0, True)
    assert tree.height_of_lowest_subtree_that_fits(a, FR, 6) == (1, True)
    assert tree.height_of_lowest_subtree_that_fits(a, FR, 9) == (2, False)


def test_a_cohort_loop_leaves_its_queues_out() -> None:
    tree = _tree(
        ClusterQueue("a", cohort="x", resource_groups=_groups(4)),
        cohorts=(Cohort("x", parent="y"), Cohort("y", parent="x")),
    )
    assert tree.in_cycle == {"a"}


@pytest.mark.parametrize(
    ("name", "amount", "shown"),
    [
        ("cpu", 1000, "1"),
        ("cpu", 1500, "1500m"),
        ("cpu", 2_000_000, "2k"),
        ("memory", 200 << 20, "200Mi"),
        ("memory", 10**9, "1G"),  # not a multiple of 1024: printed as decimal, as newCanonicalQuantity does
        ("memory", 1536, "1536"),
        ("nvidia.com/gpu", 3, "3"),
        ("nvidia.com/gpu", 1000, "1k"),
        ("pods", 0, "0"),
    ],
)
def test_amounts_are_printed_as_kueues_resource_formatter_prints_them(name: str, amount: int, shown: str) -> None:
    assert format_amount(name, amount) == shown


def test_quotas_are_counted_in_kueues_units() -> None:
    assert value("cpu", "9") == 9000 and value("cpu", "0.5") == 500
    assert value("memory", "36Gi") == 36 << 30
    assert value("nvidia.com/gpu", "0.5") == 1  # Value() rounds up


def test_workload_names_follow_jobframework() -> None:
    """GetWorkloadNameForOwnerWithGVK: "<kind>-<name>-" and 5 hex digits of sha1("Job\\nbatch\\n<name>\\n<uid>")."""
    digest = hashlib.sha1(b"Job\nbatch\nsample-job\nuid-1").hexdigest()[:5]
    assert workload_name("sample-job", "uid-1", JOB_GVK) == f"job-sample-job-{digest}"
    long = workload_name("x" * 300, "", POD_GVK)
    assert len(long) == 253 and long.startswith("pod-xxx")


def test_pods_of_one_shape_share_a_role_hash_and_another_shape_does_not() -> None:
    spec = {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    other = {"containers": [{"name": "b", "image": "y", "resources": {"requests": {"cpu": "1000m"}}}]}
    assert role_hash(spec, 0) == role_hash(other, 0)  # names and images are not part of the shape; 1 == 1000m
    assert role_hash(spec, 0) != role_hash(spec, 10)
    assert len(role_hash(spec, 0)) == 8


# What Kueue v0.19.2's own functions print for these (hack/kueue-names-oracle: `go run .`).
KUEUE_SAYS = {
    "job": "job-sample-job-78174",
    "pod": "pod-trainer-9c3d9",
    "role": "e86b8ca2",
    "role-small": "f55ee73c",
    "taint": "untolerated taint {nvidia.com/gpu present NoSchedule <nil>} in flavor gpu",
}


def test_names_hashes_and_taint_words_match_what_kueue_itself_computes() -> None:
    assert workload_name("sample-job", "3f0b4a6e-1111-4222-8333-944455556666", JOB_GVK) == KUEUE_SAYS["job"]
    assert workload_name("trainer", "", POD_GVK) == KUEUE_SAYS["pod"]
    container = {
        "name": "c",
        "image": "x",
        "resources": {
            "requests": {"cpu": "1", "memory": "200Mi", "nvidia.com/gpu": "2"},
            "limits": {"nvidia.com/gpu": "2"},
        },
        "ports": [{"containerPort": 8080}],
    }
    spec = {
        "containers": [container],
        "nodeSelector": {"pool": "a100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert role_hash(spec, 0) == KUEUE_SAYS["role"]
    small = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}
    assert role_hash(small, 0) == KUEUE_SAYS["role-small"]
    taint = Taint("nvidia.com/gpu", "present", "NoSchedule")
    assert f"untolerated taint {_go_taint(taint)} in flavor gpu" == KUEUE_SAYS["taint"]
