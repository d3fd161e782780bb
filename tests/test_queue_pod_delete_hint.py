"""The queueing hint of a preemption's deletions (kube-scheduler's AssignedPodDelete): waiting pods rejected only
by filters that read node objects alone stay out of the queue; the others are retried; the results are those of
retrying every waiting pod."""

from __future__ import annotations

from builders import node, pod, start

from accelsched.framework.scheduler import static_filters

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


def docs() -> list[dict]:
    never = {"preemptionPolicy": "Never"}
    selector = pod("selector", "1", priority=200, node_selector={"disk": "ssd"})  # NodeAffinity on every node
    big = pod("big", "2", priority=200)  # NodeResourcesFit on n1, TaintToleration on n2
    for p in (selector, big):
        p["spec"].update(never)
    return [
        node("n1", cpu=4),
        node("n2", cpu=4, taints=[TAINT]),
        pod("low", "4", node_name="n1", priority=0),
        selector,
        big,
        pod("high", "4", priority=100),  # preempts low: a deletion while selector and big wait
    ]


def attempts(hints: bool) -> tuple[list[str], list[tuple[str, str, str]]]:
    session = start(*docs())
    if not hints:
        session.scheduler.static_filters = {}  # every waiting pod retried on a deletion, as before
    seen: list[str] = []
    session.scheduler.observer = lambda p: seen.append(p.name)
    results = session.schedule()
    return seen, sorted((r.pod.name, r.node, r.message) for r in results)


def test_a_deletion_retries_only_the_pods_it_may_help_and_decides_the_same() -> None:
    with_hints, results = attempts(hints=True)
    without, expected = attempts(hints=False)
    assert without.count("selector") == 2  # retried after the preemption: the case the hint saves
    assert with_hints.count("selector") == 1
    assert with_hints.count("big") == without.count("big") == 2  # capacity freed: it may fit now
    assert results == expected
    assert "didn't match Pod's node affinity/selector" in dict((n, m) for n, _, m in results)["selector"]


def test_static_filters_are_the_leading_node_only_filters_of_the_profile() -> None:
    session = start(node("n1"))
    profile = session.scheduler.config.profiles["default-scheduler"]
    names = [p.name for p in profile.at("filter")]
    static = static_filters(profile)
    assert static == {"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity"}
    assert set(names[: len(static)]) == static  # a prefix: no filter a deletion changes comes before them
