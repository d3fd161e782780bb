"""Errors quote a user's value bounded (accelsched/errors.py quoted, clipped): a megabyte in a field makes a short
error line naming the field, not a megabyte of error."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from accelsched.cli import main
from accelsched.errors import QUOTED_LIMIT, clipped, quoted

HUGE = 1_000_000
NODE = 'apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}\n'


@pytest.mark.parametrize("value", ["a-node", "", "x" * QUOTED_LIMIT, 12, True, None, ["a", 1], {"k": "v"}])
def test_a_short_value_is_quoted_as_before(value: object) -> None:
    assert quoted(value) == repr(value)
    assert clipped(str(value)) == str(value)


def test_a_long_value_is_cut_with_how_many_more_characters() -> None:
    value = "ab" * (HUGE // 2)
    assert quoted(value) == repr(value[:QUOTED_LIMIT]) + f"... ({HUGE - QUOTED_LIMIT} more characters)"
    assert clipped(value, 10) == "ababababab... (999990 more characters)"
    long_list = list(range(HUGE // 10))
    text = quoted(long_list)
    assert text.startswith("[0, 1, 2, ") and text.endswith(f"({len(repr(long_list)) - QUOTED_LIMIT} more characters)")


BIG = "y" * HUGE
CASES = {
    # the loader's reference check
    "nodeName": (
        NODE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n"
        f'spec: {{nodeName: "{BIG}", containers: [{{name: c, image: i}}]}}\n',
        "Pod default/p: spec.nodeName: node 'yyyy",
    ),
    # the schema's enum
    "restartPolicy": (
        NODE + "---\napiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: default}\n"
        f'spec: {{template: {{spec: {{restartPolicy: "{BIG}", containers: [{{name: c, image: i}}]}}}}}}\n',
        'Job default/j: spec.template.spec.restartPolicy: Unsupported value: "yyyy',
    ),
    # the name is what is wrong, and it names the object too
    "metadata.name": (
        f'apiVersion: v1\nkind: Node\nmetadata: {{name: "{BIG}"}}\n',
        ': metadata.name: Invalid value: "yyyy',
    ),
    # a value of the wrong type
    "unschedulable": (
        f'apiVersion: v1\nkind: Node\nmetadata: {{name: n1}}\nspec: {{unschedulable: "{BIG}"}}\n',
        'Node n1: spec.unschedulable: must be true or false, got string "yyyy',
    ),
    # a Kueue object's field.Invalid (queues/validation.py's shown)
    "resources.name": (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec: {resourceGroups: "
        f'[{{coveredResources: [cpu], flavors: [{{name: f, resources: [{{name: "{BIG}", nominalQuota: 1}}]}}]}}]}}\n',
        'ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "yyyy',
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_huge_bad_value_gives_a_short_error_naming_the_field(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    path = tmp_path / "in.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["schedule", "-f", str(path), "-o", "json"])
    assert result.exit_code == 2, result.output[:500]
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 500, result.output[:500]
    assert str(path) in lines[0] and expected in lines[0], lines[0]
