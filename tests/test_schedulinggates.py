"""SchedulingGates as kube-scheduler v1.36.3: a PreEnqueue plugin; a gated pod never enters the active queue.

Offline a gated pod is reported unbound with the PodScheduled message the API server gives it (pod strategy:
reason SchedulingGated, ``Scheduling is blocked due to non-empty scheduling gates``), and ``explain`` names the
gates with the plugin's own status (``waiting for scheduling gates: [a b]``, Go's %v of the names). Both strings
are written from the v1.36.3 source until the HARNESS records them from the real components.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from builders import config, node, pod, run, session
from click.testing import CliRunner

from accelsched.api.objects import parse_pod
from accelsched.cli import main
from accelsched.errors import InputError
from accelsched.framework.interface import Code
from accelsched.plugins import schedulinggates
from accelsched.plugins.registry import DEFAULT_PLUGINS
from accelsched.report import to_objects

GATED = "Scheduling is blocked due to non-empty scheduling gates"


def gated(name: str, *gates: str, **kw) -> dict:
    doc = pod(name, **kw)
    doc["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return doc


def test_a_gated_pod_is_not_scheduled_and_reports_the_api_servers_condition() -> None:
    results = run([node("a")], [gated("waiting", "example.com/quota", "b"), pod("free")])
    assert results["free"].node == "a"
    r = results["waiting"]
    assert r.node is None
    assert r.message == GATED
    assert r.reasons == {}
    assert r.gated is not None and r.gated.plugin == "SchedulingGates"
    assert r.gated.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert r.gated.message == "waiting for scheduling gates: [example.com/quota b]"


def test_a_gated_pod_holds_nothing_and_is_never_tried() -> None:
    """Even first in queue order (higher priority), it takes no room and never preempts."""
    nodes = [node("a", cpu="1")]
    results = run(nodes, [pod("low", "1", node_name="a", priority=1), gated("big", "g", cpu="1", priority=1000)])
    assert results["big"].message == GATED
    assert results["big"].preempted == []
    assert "low" not in results  # never evicted


def test_the_status_names_every_gate_in_order() -> None:
    plugin = schedulinggates.new({}, None)
    assert plugin.pre_enqueue(parse_pod(pod("p"))).ok
    status = plugin.pre_enqueue(parse_pod(gated("p", "z.io/second", "a.io/first")))
    assert status.reasons == ("waiting for scheduling gates: [z.io/second a.io/first]",)


def test_schedule_json_reports_the_gated_pod(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), gated("waiting", "example.com/wait"), pod("free")]))
    result = CliRunner().invoke(main, ["schedule", "-f", str(path), "-o", "json", "--reasons"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    entry = next(p for p in out["pods"] if p["name"] == "waiting")
    assert entry == {
        "namespace": "default",
        "name": "waiting",
        "node": None,
        "devices": {},
        "message": GATED,
        "reasons": {},  # never tried: no node rejected it
    }
    assert next(p for p in out["pods"] if p["name"] == "free")["node"] == "a"


def test_explain_says_which_gates(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([node("a"), gated("waiting", "example.com/wait", "team/review")]))
    result = CliRunner().invoke(main, ["explain", "waiting", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["node"] is None
    assert out["message"] == GATED
    assert "SchedulingGates: waiting for scheduling gates: [example.com/wait team/review]" in out["notes"]
    table = CliRunner().invoke(main, ["explain", "waiting", "-f", str(path)])
    assert table.exit_code == 0, table.output
    assert "is gated" in table.output
    assert "example.com/wait team/review" in table.output


def test_the_written_pod_carries_the_scheduling_gated_condition() -> None:
    s = session([node("a")], [gated("waiting", "g")])
    (item,) = to_objects(s.schedule())["items"]
    (condition,) = item["status"]["conditions"]
    assert condition == {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": GATED}


def test_scheduling_gates_runs_first_in_the_default_profile_at_pre_enqueue() -> None:
    assert DEFAULT_PLUGINS[0] == ("SchedulingGates", 0)
    profile = config().profiles["default-scheduler"]
    # DynamicResources implements PreEnqueue too (claims must exist), after SchedulingGates as in the MultiPoint order
    assert [p.name for p in profile.at("preEnqueue")] == ["SchedulingGates", "DynamicResources"]


def test_pre_enqueue_is_a_configurable_extension_point() -> None:
    cfg = config(plugins={"preEnqueue": {"disabled": [{"name": "SchedulingGates"}]}})
    assert [p.name for p in cfg.profiles["default-scheduler"].at("preEnqueue")] == ["DynamicResources"]
    assert run([node("a")], [gated("waiting", "g")], config=cfg)["waiting"].node == "a"
    with pytest.raises(InputError, match="does not implement preEnqueue"):
        config(plugins={"preEnqueue": {"enabled": [{"name": "NodePorts"}]}})


@pytest.mark.parametrize(
    ("gates", "node_name", "field", "words"),
    [
        (["a", "a"], None, "spec.schedulingGates[1]", 'Duplicate value: "a"'),
        (["not a name!"], None, "spec.schedulingGates[0]", 'Invalid value: "not a name!"'),
        (["a"], "n1", "spec.nodeName", "cannot be set until all schedulingGates have been cleared"),
    ],
)
def test_gates_the_api_server_refuses_are_bad_input(gates, node_name, field, words) -> None:
    with pytest.raises(InputError) as err:
        parse_pod(gated("p", *gates, node_name=node_name), "pods.yaml")
    assert err.value.field == field
    assert words in err.value.message
