"""A resource no node advertises: Pending with kube-scheduler's ``Insufficient <res>`` everywhere, and explain's note
naming the advertised resources closest to it (most often a typo)."""

from __future__ import annotations

from builders import node, pod, start

from accelsched.explain import Explainer

GPU = "nvidia.com/gpu"


def explained(nodes: list[dict], target: dict):
    session = start(*nodes, target)
    explainer = Explainer(session.scheduler)
    (result,) = session.schedule()
    return result, explainer.explanation(result.pod, result)


def test_a_typo_is_pending_and_explain_names_the_closest_resource() -> None:
    nodes = [node("a", **{GPU: 8}), node("b", **{GPU: 8, "example.com/fpga": 2})]
    result, explanation = explained(nodes, pod("p", extra={"nvidia.com/gpus": 1}))
    assert result.node is None
    assert result.message.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpus.")
    assert explanation.notes == ["no node advertises nvidia.com/gpus; nodes advertise nvidia.com/gpu"]
    assert explanation.to_json()["notes"] == explanation.notes


def test_with_nothing_close_every_advertised_extended_resource_is_listed() -> None:
    nodes = [node("a", **{GPU: 8, "example.com/fpga": 2})]
    _, explanation = explained(nodes, pod("p", extra={"qualcomm.com/ai-accelerator": 1}))
    assert explanation.notes == [
        "no node advertises qualcomm.com/ai-accelerator; nodes advertise example.com/fpga, nvidia.com/gpu"
    ]


def test_an_advertised_resource_gets_no_note() -> None:
    result, explanation = explained([node("a", **{GPU: 1})], pod("p", extra={GPU: 2}))
    assert result.node is None and explanation.notes == []
