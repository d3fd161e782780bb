#!/usr/bin/env python3
"""Extract the compact schema accelsched validates manifests against, from the pinned Kubernetes OpenAPI spec.

Run at dev time when the pinned Kubernetes version changes; the output is committed as package data:

    python hack/gen-schema.py [--spec DIR] [--out accelsched/api/schema.json.gz]

Inputs: the real OpenAPI v3 documents of k8s.io/kubernetes (api/openapi-spec/v3/*.json) and the
openAPIV3Schema of the CRDs in deploy/crds and of Kueue's CRDs (kueue.x-k8s.io/v1beta2, from the Go module
sigs.k8s.io/kueue@v0.19.2: ``go mod download sigs.k8s.io/kueue@v0.19.2``). The output keeps only what
validation needs: for every served apiVersion of the kinds below, its fields and their types, required
fields, and enums. The spec itself carries no enums at this version (the +enum markers are not published),
so the enums of the fields we check come from the Go constants in k8s.io/api (ENUMS below, with their Go
type names).

Compact node forms (accelsched/api/validation.py reads them):
  "s" string, "t" date-time string, "i32"/"i64" integer, "n" number, "b" boolean, "q" quantity,
  "ios" int-or-string, "o" any mapping, "any" anything;
  {"r": DEF} a named definition, {"a": NODE} array, {"m": NODE} map, {"e": [values]} string enum,
  {"p": {field: NODE}, "q": [required fields]} object.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = "/root/go/pkg/mod/k8s.io/kubernetes@v1.36.3/api/openapi-spec/v3"
K8S_VERSION = "v1.36.3"
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# The kinds accelsched reads (fully validated), and those it reads past (validated too: it is cheap).
KINDS = {
    # read
    "Pod", "Node", "Namespace", "PriorityClass", "Deployment", "ReplicaSet", "ReplicationController",
    "StatefulSet", "Job", "DaemonSet",
    # DRA (resource.k8s.io): dra/objects.py reads them
    "ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate",
    # the upstream gang API (scheduling.k8s.io/v1alpha2; PodGroup also comes from the scheduler-plugins CRD)
    "PodGroup", "Workload",
    # read past (loader.QUIET_KINDS)
    "Service", "ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
    "ClusterRoleBinding", "Endpoints", "EndpointSlice", "Event", "Lease", "CustomResourceDefinition",
    "PodDisruptionBudget", "Ingress", "NetworkPolicy", "HorizontalPodAutoscaler", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "LimitRange", "ResourceQuota", "ControllerRevision",
    "CSIDriver", "CSINode", "RuntimeClass", "CronJob",
}  # fmt: skip
# Kinds accelsched reads from CRDs (deploy/crds), not from the built-in spec.
CRD_KINDS = {"PodGroup", "NodeResourceTopology"}
# Kueue's kinds (accelsched/queues reads them), at its storage version only.
KUEUE_CRDS = "/root/go/pkg/mod/sigs.k8s.io/kueue@v0.19.2/config/components/crd/bases"
KUEUE_KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass", "Workload"}
KUEUE_VERSIONS = {"v1beta2"}
POD_TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"

# Enums from the Go constants of k8s.io/api@v0.36.3 (the spec does not publish them). "" where the API allows
# the empty value (it means a default).
_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]  # core/v1 TaintEffect
_PREEMPTION = ["PreemptLowerPriority", "Never"]  # core/v1 PreemptionPolicy
ENUMS = {
    ("io.k8s.api.core.v1.Taint", "effect"): _EFFECTS,
    ("io.k8s.api.core.v1.Toleration", "effect"): ["", *_EFFECTS],
    # TolerationOperator: Lt and Gt sit behind the alpha gate TaintTolerationComparisonOperators (off by default).
    ("io.k8s.api.core.v1.Toleration", "operator"): ["", "Exists", "Equal"],
    ("io.k8s.api.core.v1.NodeSelectorRequirement", "operator"): ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", "operator"): [
        "In",
        "NotIn",
        "Exists",
        "DoesNotExist",
    ],
    ("io.k8s.api.core.v1.PodSpec", "restartPolicy"): ["", "Always", "OnFailure", "Never"],  # RestartPolicy
    ("io.k8s.api.core.v1.PodSpec", "dnsPolicy"): ["", "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    ("io.k8s.api.core.v1.PodSpec", "preemptionPolicy"): _PREEMPTION,
    ("io.k8s.api.scheduling.v1.PriorityClass", "preemptionPolicy"): _PREEMPTION,
    ("io.k8s.api.core.v1.Container", "imagePullPolicy"): ["", "Always", "Never", "IfNotPresent"],
    ("io.k8s.api.core.v1.Container", "terminationMessagePolicy"): ["", "File", "FallbackToLogsOnError"],
    ("io.k8s.api.core.v1.Container", "restartPolicy"): ["Always"],  # ContainerRestartPolicy (sidecars)
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): ["", "TCP", "UDP", "SCTP"],  # Protocol
    ("io.k8s.api.core.v1.TopologySpreadConstraint", "whenUnsatisfiable"): ["DoNotSchedule", "ScheduleAnyway"],
    ("io.k8s.api.core.v1.TopologySpreadConstraint", "nodeAffinityPolicy"): ["Honor", "Ignore"],
    ("io.k8s.api.core.v1.TopologySpreadConstraint", "nodeTaintsPolicy"): ["Honor", "Ignore"],
    ("io.k8s.api.core.v1.PodStatus", "phase"): ["", "Pending", "Running", "Succeeded", "Failed", "Unknown"],
    ("io.k8s.api.apps.v1.DeploymentStrategy", "type"): ["", "Recreate", "RollingUpdate"],
    ("io.k8s.api.apps.v1.DaemonSetUpdateStrategy", "type"): ["", "RollingUpdate", "OnDelete"],
    ("io.k8s.api.apps.v1.StatefulSetUpdateStrategy", "type"): ["", "RollingUpdate", "OnDelete"],
    ("io.k8s.api.apps.v1.StatefulSetSpec", "podManagementPolicy"): ["", "OrderedReady", "Parallel"],
    ("io.k8s.api.batch.v1.JobSpec", "completionMode"): ["", "NonIndexed", "Indexed"],
    ("io.k8s.api.core.v1.ServiceSpec", "type"): ["", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"],
}


class Builder:
    def __init__(self, schemas: dict[str, dict]) -> None:
        self.schemas = schemas
        self.defs: dict[str, object] = {}

    def ref(self, name: str) -> object:
        target = self.schemas[name]
        if not target.get("properties") and target.get("type") != "object" and "additionalProperties" not in target:
            return self.node(target, name)  # a scalar named type (Quantity, Time, IntOrString): inline it
        if name not in self.defs:
            self.defs[name] = None  # placeholder: breaks recursion (JSONSchemaProps refers to itself)
            self.defs[name] = self.node(target, name)
        return {"r": name}

    def node(self, s: dict, owner: str = "") -> object:
        if "$ref" in s:
            return self.ref(s["$ref"].rsplit("/", 1)[1])
        for key in ("allOf", "anyOf", "oneOf"):
            if len(s.get(key) or ()) == 1:
                return self.node(s[key][0], owner)
        if s.get("x-kubernetes-preserve-unknown-fields"):
            return "any"
        alternatives = {a.get("type") for a in s.get("oneOf") or s.get("anyOf") or ()}
        int_or_string = alternatives == {"integer", "string"}
        if s.get("format") == "int-or-string" or s.get("x-kubernetes-int-or-string") or int_or_string:
            return "q" if "pattern" in s and "KMGTPE" in s["pattern"] else "ios"
        if alternatives == {"string", "number"}:
            return "q"
        t = s.get("type")
        if t == "string":
            if "enum" in s:
                return {"e": list(s["enum"])}
            return "t" if s.get("format") == "date-time" else "s"
        if t == "integer":
            return "i32" if s.get("format") == "int32" else "i64"
        if t == "number":
            return "n"
        if t == "boolean":
            return "b"
        if t == "array":
            return {"a": self.node(s.get("items") or {})}
        if t == "object" or "properties" in s or "additionalProperties" in s:
            if "properties" in s:
                props = {}
                for k, v in s["properties"].items():
                    enum = ENUMS.get((owner, k))
                    props[k] = {"e": enum} if enum else self.node(v)
                out: dict[str, object] = {"p": props}
                if s.get("required"):
                    out["q"] = sorted(s["required"])
                return out
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                return {"m": self.node(extra)}
            return "o"
        return "any"


def load_spec(spec_dir: str) -> tuple[dict[str, dict], dict[tuple[str, str], str]]:
    schemas: dict[str, dict] = {}
    gvks: dict[tuple[str, str], str] = {}
    for path in sorted(glob.glob(os.path.join(spec_dir, "*.json"))):
        with open(path) as f:
            for name, s in (json.load(f).get("components") or {}).get("schemas", {}).items():
                schemas.setdefault(name, s)
                for gvk in s.get("x-kubernetes-group-version-kind") or ():
                    api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                    gvks.setdefault((gvk["kind"], api_version), name)
    return schemas, gvks


def crd_schemas(
    builder: Builder, crd_dir: str, kinds: set[str] = CRD_KINDS, versions: set[str] | None = None
) -> dict[str, dict[str, str]]:
    """Each served version of the CRDs we read: its openAPIV3Schema, with metadata as the API server checks it."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(glob.glob(os.path.join(crd_dir, "*.yaml"))):
        with open(path) as f:
            crd = yaml.safe_load(f)
        spec = crd["spec"]
        kind = spec["names"]["kind"]
        if kind not in kinds:
            continue
        for version in spec["versions"]:
            if not version.get("served", True) or (versions is not None and version["name"] not in versions):
                continue
            api_version = f"{spec['group']}/{version['name']}"
            schema = json.loads(json.dumps(version["schema"]["openAPIV3Schema"]))
            schema.setdefault("properties", {})["metadata"] = {"$ref": f"#/components/schemas/{META}"}
            _pod_templates_by_ref(schema)
            name = f"crd:{api_version}.{kind}"
            builder.defs[name] = builder.node(schema, name)
            out.setdefault(kind, {})[api_version] = name
    return out


def _pod_templates_by_ref(schema: dict) -> None:
    """A Workload's podSets[].template is a PodTemplateSpec inlined into the CRD (10,000 lines): the built-in
    definition stands in for it, so the schema stays small and a template is checked as a Pod's spec is."""
    pod_sets = (schema.get("properties") or {}).get("spec", {}).get("properties", {}).get("podSets")
    if pod_sets and "template" in (pod_sets.get("items") or {}).get("properties", {}):
        pod_sets["items"]["properties"]["template"] = {"$ref": f"#/components/schemas/{POD_TEMPLATE}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=SPEC, help="the OpenAPI v3 folder of the pinned k8s.io/kubernetes")
    ap.add_argument("--crds", default=os.path.join(ROOT, "deploy", "crds"))
    ap.add_argument("--kueue-crds", default=KUEUE_CRDS, help="config/components/crd/bases of sigs.k8s.io/kueue")
    ap.add_argument("--out", default=os.path.join(ROOT, "accelsched", "api", "schema.json.gz"))
    args = ap.parse_args()
    schemas, gvks = load_spec(args.spec)
    builder = Builder(schemas)
    kinds: dict[str, dict[str, str]] = {}
    for (kind, api_version), name in sorted(gvks.items()):
        if kind in KINDS and not name.startswith("io.k8s.apimachinery"):
            builder.ref(name)
            kinds.setdefault(kind, {})[api_version] = name
    for kind, versions in crd_schemas(builder, args.crds).items():  # PodGroup: the built-in and the CRD's
        kinds.setdefault(kind, {}).update(versions)
    for kind, versions in crd_schemas(builder, args.kueue_crds, KUEUE_KINDS, KUEUE_VERSIONS).items():
        kinds.setdefault(kind, {}).update(versions)  # Workload: the upstream gang API's and Kueue's
    missing = (KINDS | CRD_KINDS | KUEUE_KINDS) - set(kinds)
    if missing:
        print(f"gen-schema: kinds not found: {', '.join(sorted(missing))}", file=sys.stderr)
        return 1
    doc = {"kubernetes": K8S_VERSION, "kinds": kinds, "defs": dict(sorted(builder.defs.items()))}
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    with open(args.out, "wb") as f:
        f.write(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"gen-schema: {len(kinds)} kinds, {len(builder.defs)} definitions, {len(data)} bytes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
