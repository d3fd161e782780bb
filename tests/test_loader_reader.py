"""Reading manifest files: encodings, JSON as JSON, duplicate keys, alias bombs, size bounds, and that JSON and YAML
of one cluster schedule identically."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from accelsched.api import limits, reader
from accelsched.api.loader import read_documents
from accelsched.cli import main
from accelsched.errors import InputError

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # benchmarks/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(REPO))

from benchmarks.cli import cluster_objects, write_kubectl_json, write_yaml  # noqa: E402

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "64", memory: 64Gi, pods: "110"}}
"""
POD = """apiVersion: v1
kind: Pod
metadata:
  name: p1
  namespace: team
spec:
  containers:
  - name: c
    resources:
      requests:
        cpu: "64"
        cpu: "1"
"""


def schedule(*files: Path) -> tuple[int, str]:
    args = ["schedule", "-o", "json"]
    for f in files:
        args += ["-f", str(f)]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def error_of(tmp_path: Path, data: bytes | str, name: str = "in.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(InputError) as info:
        read_documents(path)
    return str(info.value)


# ---------------------------------------------------------------------------------------------- encodings


def test_latin1_file_names_the_byte_offset_and_line(tmp_path: Path) -> None:
    text = NODE.replace("n1", "n\xe9").encode("latin-1")
    message = error_of(tmp_path, text)
    offset = text.index(b"\xe9")
    assert message.startswith(f"{tmp_path / 'in.yaml'}: is not UTF-8 text: invalid byte 0xe9 at byte offset {offset}")
    assert "(line 3)" in message


def test_binary_file_is_one_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "blob.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    code, output = schedule(path)
    assert code == 2
    assert output.startswith(f"accelsched: error: {path}: ") and "Traceback" not in output


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-8-sig"])
def test_byte_order_marked_files_read_like_kubectl(tmp_path: Path, encoding: str) -> None:
    data = (NODE).encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path = tmp_path / "bom.yaml"
    path.write_bytes(data)
    (doc,) = read_documents(path)
    assert doc.kind == "Node" and doc.doc["metadata"]["name"] == "n1"


def test_utf16_without_bom_is_an_error(tmp_path: Path) -> None:
    assert "is not UTF-8 text" in error_of(tmp_path, NODE.encode("utf-16-le"))


# ---------------------------------------------------------------------------------------------- duplicate keys


def test_duplicate_yaml_key_names_object_field_and_lines(tmp_path: Path) -> None:
    message = error_of(tmp_path, NODE + "---\n" + POD)
    assert message == (
        f"{tmp_path / 'in.yaml'}: Pod team/p1: spec.containers[0].resources.requests: "
        'line 17: key "cpu" already set in map (first at line 16)'
    )


def test_duplicate_flow_key_exits_2_without_scheduling(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    flow = POD.replace(
        '      requests:\n        cpu: "64"\n        cpu: "1"\n', '      requests: {cpu: "64", cpu: "1"}\n'
    )
    assert flow != POD
    path.write_text(NODE + "---\n" + flow)
    code, output = schedule(path)
    assert code == 2, output
    assert 'key "cpu" already set in map' in output


def test_duplicate_json_field_in_a_list_item(tmp_path: Path) -> None:
    node = yaml.safe_load(NODE)
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}, indent=4)
    text = text.replace('"cpu": "64"', '"cpu": "64", "cpu": "1"')
    message = error_of(tmp_path, text, "dump.json")
    assert message.startswith(f"{tmp_path / 'dump.json'} (items[0]): Node n1: status.capacity: line ")
    assert 'key "cpu" already set in map' in message


def test_duplicate_keys_of_a_merge_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(
        NODE.replace(
            'status: {capacity: {cpu: "64", memory: 64Gi, pods: "110"}}',
            'status: {capacity: {<<: {cpu: "2", memory: 64Gi}, cpu: "64", pods: "110"}}',
        )
    )
    docs = [d for d in read_documents(path) if d.kind == "Node"]
    assert docs[0].doc["status"]["capacity"] == {"cpu": "64", "memory": "64Gi", "pods": "110"}


# ---------------------------------------------------------------------------------------------- aliases and bounds


def test_alias_bomb_in_a_deployment_template_is_refused_quickly(tmp_path: Path) -> None:
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        bomb.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    labels = "\n".join("        " + line for line in bomb)
    text = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: d, namespace: default}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: d}}}}
  template:
    metadata:
      labels: {{app: d}}
      annotations:
{labels}
    spec:
      containers: [{{name: c}}]
"""
    message = error_of(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'in.yaml'}: document at line 1 contains excessive aliasing: ")


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    assert "contains an alias of itself" in error_of(tmp_path, "a: &a [*a]\nkind: Pod\n")


def test_small_aliases_read_as_before(tmp_path: Path) -> None:
    text = NODE.replace("metadata: {name: n1}", "metadata: {name: n1, labels: &l {app: web}, annotations: *l}")
    path = tmp_path / "alias.yaml"
    path.write_text(text)
    assert read_documents(path)[0].doc == yaml.safe_load(text)


def test_file_past_the_byte_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(NODE * 20)
    try:
        limits.configure({"input_bytes": 100})
        message = error_of(tmp_path, path.read_bytes(), "big.yaml")
    finally:
        limits.configure()
    assert "more than the limit of 100" in message and "--limit input_bytes=" in message


def test_too_many_objects_is_refused(tmp_path: Path) -> None:
    try:
        limits.configure({"objects": 3})
        message = error_of(tmp_path, "---\n".join(NODE.replace("n1", f"n{i}") for i in range(4)))
    finally:
        limits.configure()
    assert "objects 4 is more than the limit of 3" in message


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    # Like kubectl, JSON that does not parse is tried as YAML (flow style); when neither reads, the JSON error.
    message = error_of(tmp_path, '{"kind": "List", "items": [\n  {"kind": "Node"}\n}', "bad.json")
    assert message.startswith(f"{tmp_path / 'bad.json'}: malformed JSON at line 3, column 1: ")


def test_json_stream_and_yaml_flow_style(tmp_path: Path) -> None:
    node = json.dumps(yaml.safe_load(NODE))
    stream = tmp_path / "stream.json"
    stream.write_text(node + "\n" + node.replace('"n1"', '"n2"'))
    assert [d.doc["metadata"]["name"] for d in read_documents(stream)] == ["n1", "n2"]
    flow = tmp_path / "flow.yaml"
    flow.write_text("{kind: Node, apiVersion: v1, metadata: {name: n3}, status: {capacity: {cpu: '1'}}}\n")
    assert read_documents(flow)[0].doc["metadata"]["name"] == "n3"


def test_fast_yaml_builder_matches_the_strict_loader_and_types_scalars_as_go_yaml() -> None:
    text = (
        "a: 1\nb: 1.5\nc: yes\nd: ~\ne: ''\nf: '1'\ng: 2026-11-20T12:00:00Z\nh: [1, two, {x: null}]\n"
        "i: 0o17\nj: 0x1f\nk: .inf\nl: |\n  block\nm: &m {n: 1}\no: *m\n"
        "p: 2024-02-30\nq: 1:30\nr: 08\ns: 1e3\nt: 3.0\nu: 0755\nv: 1_000\nw: y\n---\n---\n- x\n"
    )
    fast = reader._fast_yaml(text)
    assert fast == reader._strict_yaml(text, "x")
    doc = fast[0]
    # go-yaml v2 (sigs.k8s.io/yaml, what kubectl reads YAML with), then kubectl's YAML to JSON:
    assert doc["g"] == "2026-11-20T12:00:00Z" and doc["p"] == "2024-02-30"  # timestamps stay strings
    assert (doc["i"], doc["j"], doc["u"], doc["v"]) == (15, 31, 493, 1000)  # strconv.ParseInt(s, 0, 64)
    assert (doc["q"], doc["r"], doc["s"], doc["t"], doc["w"]) == ("1:30", 8, 1000, 3, True)
    assert doc["m"] == doc["o"] == {"false": 1}  # a key n is the boolean false, made the JSON key "false"
    assert fast[1] == ["x"]


def test_bad_tagged_values_and_keys_are_one_line_errors() -> None:
    for text, message in [
        ("a: !!bool abc\n", "a: line 1: cannot decode 'abc' as tag:yaml.org,2002:bool"),
        ("y: 1\ntrue: 2\n", 'line 2: key "true" already set in map (first at line 1)'),
        ("? ~\n: 1\n", "unsupported map key of type NoneType"),
    ]:
        with pytest.raises(InputError) as err:
            reader.parse(text, "x.yaml")
        assert message in str(err.value), (text, str(err.value))


# ---------------------------------------------------------------------------------------------- equivalence


def test_one_cluster_as_yaml_and_as_kubectl_json_schedules_identically(tmp_path: Path) -> None:
    objs = cluster_objects(nodes=40, bound=200, pending=60)
    as_yaml, as_json = tmp_path / "cluster.yaml", tmp_path / "cluster.json"
    write_yaml(as_yaml, objs)
    write_kubectl_json(as_json, objs)
    code_y, out_y = schedule(as_yaml)
    code_j, out_j = schedule(as_json)
    assert code_y == code_j == 0, out_y + out_j
    assert out_y == out_j
    pods = json.loads(out_j)["pods"]
    assert len(pods) == 60 and all(p["node"] for p in pods)
