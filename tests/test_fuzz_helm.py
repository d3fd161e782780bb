"""Fuzzing charts/accelsched's values through the real Helm v4 (issue 28): random values documents (a leaf of
values.yaml given another type, unknown keys, nested garbage, nulls, which Helm reads as "drop the default").

Each either is refused by the chart's schema naming the field ("values don't meet the specifications of the
schema") or by one of the chart's own ``fail`` checks, or renders documents that are valid Kubernetes objects
(kubernetes-validate, strict, as tests/test_manifests.py) whose accelsched configs load with accelsched's own
loaders (as tests/test_chart.py). Never a template execution error: ``error calling``, ``nil pointer``, ``wrong
type for value``. The fast variant runs a few dozen derandomized documents; the slow one (``-m integration``)
hundreds, and ``helm lint`` on some. Helm is looked up, never built (tests/test_chart.py's fixture).
"""

from __future__ import annotations

import copy
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_chart import CHART, NAMESPACE, RELEASE, helm  # noqa: F401  (helm: the fixture)
from test_manifests import CUSTOM_KINDS, K8S_VERSION, _group

from accelsched.config.load import load_config
from accelsched.deviceplugin.config import load as load_plugin_config
from accelsched.errors import InputError

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus" / "helm"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA_REFUSED = "values don't meet the specifications of the schema"
LINT_REFUSED = "[ERROR] values.yaml: - at '"  # helm lint's wording of the same refusal
# What a template says when a value of the wrong shape reaches it: the schema should have refused the value.
TEMPLATE_ERRORS = ("error calling", "nil pointer", "wrong type for value", "error converting YAML", "can't evaluate")
# The chart's own checks (templates' ``fail``): a refusal as good as the schema's.
CHART_FAILS = ("scheduler.replicas > 1 needs scheduler.leaderElection.enabled",)
# Kinds of other projects' CRDs the chart may render (the core schema cannot know them).
CHART_CUSTOM_KINDS = CUSTOM_KINDS | {
    ("monitoring.coreos.com", "ServiceMonitor"),
    ("monitoring.coreos.com", "PrometheusRule"),
}
ODD = [None, True, False, "", "x", "ñame 名前", "{{ .Values }}", 0, -1, 1.5, 2**63, "1e999", [], {}, [1, "a"],
       {"a": 1}, {"a": {"b": {"c": [None, {"d": "e"}]}}}, "0x10", "1Gi", "Always", "a" * 300]  # fmt: skip


def _leaves(node: Any, prefix: tuple = ()) -> list[tuple]:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    out: list[tuple] = [prefix] if prefix else []
    for key, value in items:
        out.extend(_leaves(value, (*prefix, key)))
    return out


PATHS = _leaves(VALUES)
# Configs the chart passes through as written (values.yaml: "`accelsched run` validates it as kube-scheduler does
# and exits 2 naming the field"): inside them the schema checks nothing, accelsched's loader refuses at start.
PASS_THROUGH = {("scheduler", "config"), ("scheduler", "profile"), ("devicePlugin", "config")}


def _passed_through(path: tuple) -> bool:
    return len(path) > 2 and path[:2] in PASS_THROUGH


_MISSING = object()


def _at(node: Any, path: tuple) -> Any:
    """The value at ``path`` (dict keys, list indexes), or _MISSING."""
    for key in path:
        in_dict = isinstance(node, dict) and key in node
        if not in_dict and not (isinstance(node, list) and isinstance(key, int) and key < len(node)):
            return _MISSING
        node = node[key]
    return node


@st.composite
def values_documents(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], bool]:
    """values.yaml with 1-3 mutations: a value of another type (or null), an unknown key, nested garbage; and
    whether every mutation is inside a config passed through."""
    doc = copy.deepcopy(VALUES)
    steps = []
    passed_through = True
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        parent = _at(doc, path[:-1])
        if (
            not isinstance(parent, dict | list) or _at(parent, path[-1:]) is _MISSING
        ):  # an earlier mutation changed the shape above
            continue
        passed_through &= _passed_through(path)
        op = draw(st.sampled_from(["type", "type", "type", "unknown", "garbage"]))
        if op == "type":
            value = copy.deepcopy(draw(st.sampled_from(ODD)))
            parent[path[-1]] = value
            steps.append(f"{'.'.join(map(str, path))} = {value!r:.60}")
        elif op == "unknown" and isinstance(parent, dict):
            name = draw(st.sampled_from(["bogus", "Enabled", "enabled ", "extra"]))
            parent[name] = copy.deepcopy(draw(st.sampled_from(ODD)))
            steps.append(f"unknown key {name!r} beside {'.'.join(map(str, path))}")
        else:
            garbage: Any = "leaf"
            for depth in range(draw(st.integers(1, 30))):
                garbage = {f"k{depth}": garbage} if depth % 2 else [garbage]
            parent[path[-1]] = garbage
            steps.append(f"{'.'.join(map(str, path))} = nested garbage")
    return doc, steps, passed_through and bool(steps)


def _loads_configs(docs: list[dict[str, Any]], tmp: Path) -> None:
    """The rendered configs load with the loaders `accelsched run --config` and `device-plugin --config` use."""
    for d in docs:
        if d.get("kind") != "ConfigMap" or "config.yaml" not in (d.get("data") or {}):
            continue
        path = tmp / f"{d['metadata']['name']}.yaml"
        path.write_text(d["data"]["config.yaml"])
        if d["metadata"]["name"].endswith("-scheduler"):
            load_config(str(path))
        elif d["metadata"]["name"].endswith("-device-plugin"):
            load_plugin_config(str(path))


def check_values(
    helm_bin: Path, doc: dict[str, Any], steps: list[str], passed_through: bool, lint: bool = False
) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzz-helm-") as tmp:
        values = Path(tmp) / "values.yaml"
        values.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
        commands = [["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values)]]
        if lint:
            commands.append(["lint", "--strict", str(CHART), "-f", str(values)])
        for args in commands:
            proc = subprocess.run([str(helm_bin), *args], capture_output=True, text=True, timeout=120, check=False)
            said = proc.stdout + proc.stderr
            assert not any(e in said for e in TEMPLATE_ERRORS), f"{steps}: helm {args[0]}: a template error\n{said}"
            if proc.returncode != 0:
                refused = SCHEMA_REFUSED in said or LINT_REFUSED in said or any(f in said for f in CHART_FAILS)
                assert refused, f"{steps}: helm {args[0]}\n{said}"
                continue
            if args[0] != "template":
                continue
            rendered = [d for d in yaml.safe_load_all(proc.stdout) if d]
            for obj in rendered:
                if (_group(obj["apiVersion"]), obj["kind"]) in CHART_CUSTOM_KINDS:
                    continue
                try:
                    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
                except kubernetes_validate.ValidationError as exc:
                    raise AssertionError(f"{steps}: {obj['kind']} {obj['metadata'].get('name')}: {exc}") from None
            try:
                _loads_configs(rendered, Path(tmp))
            except InputError as exc:
                # Inside a config passed through, accelsched's refusal (one line naming file and field) is the one.
                one_line = str(exc).startswith(tmp) and "\n" not in str(exc)
                assert passed_through and one_line, f"{steps}: a rendered config does not load: {exc}"


FAST = settings(
    derandomize=True, database=None, deadline=None, phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], report_multiple_bugs=False,
)  # fmt: skip


@settings(FAST, max_examples=25)
@given(case=values_documents())
def test_mutated_values_are_refused_by_the_schema_or_render_valid_objects(helm: Path, case: tuple) -> None:  # noqa: F811
    check_values(helm, *case)


@pytest.mark.integration
@settings(FAST, max_examples=300)
@given(case=values_documents(), lint=st.integers(0, 9))
def test_mutated_values_slow(helm: Path, case: tuple, lint: int) -> None:  # noqa: F811
    check_values(helm, *case, lint=lint == 0)


@pytest.mark.parametrize("case", yaml.safe_load((CORPUS / "index.yaml").read_text()), ids=lambda c: c["file"])
def test_helm_corpus_case(helm: Path, case: dict[str, str]) -> None:  # noqa: F811
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(CORPUS / case["file"])]
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0, f"{case['file']} ({case['why']}) rendered"
    assert SCHEMA_REFUSED in proc.stderr and case["field"] in proc.stderr, proc.stderr
