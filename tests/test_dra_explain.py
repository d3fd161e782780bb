"""The device-level explanation of DRA claims (accelsched/dra/explain.py) on hand-built nodes: which devices match the
class and the request, which are taken and by whom, which fail a constraint, taints, counters, CEL runtime errors,
missing classes, and the smallest change that makes the node feasible (the wording asked for in issue 13)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from accelsched.dra import explain as dx
from accelsched.dra.model import DeviceID
from accelsched.dra.objects import parse_device_class, parse_resource_claim, parse_resource_slice

MEMORY_40 = "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"


def device_class(name: str = "gpu.example.com", expression: str | None = None) -> object:
    expression = expression or f'device.driver == "{name}"'
    return parse_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )


def gpu(name: str, memory: str = "80Gi", **extra: object) -> dict:
    return {"name": name, "capacity": {"memory": {"value": memory}}, **extra}


def gpu_slice(node: str, devices: list[dict], driver: str = "gpu.example.com", **spec: object) -> object:
    return parse_resource_slice(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
                **spec,
            },
        }
    )


def claim(name: str, requests: list[dict], constraints: list[dict] | None = None, ns: str = "default") -> object:
    spec: dict = {"devices": {"requests": requests}}
    if constraints:
        spec["devices"]["constraints"] = constraints
    return parse_resource_claim(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
         "spec": spec}
    )  # fmt: skip


def exactly(name: str, count: int = 1, cls: str = "gpu.example.com", selectors: tuple[str, ...] = (), **more) -> dict:
    body: dict = {"deviceClassName": cls, **({} if more.get("allocationMode") == "All" else {"count": count}), **more}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def located(*slices: object) -> list:
    return [(s, d) for s in slices for d in s.devices]


def explain(node, claims, classes, devices, holders=None, slices=None, elsewhere=None, capacity_used=None):
    holders = holders or {}
    in_use = lambda device_id: holders.get(device_id, [])  # noqa: E731
    counters = dx.CounterBook(slices or [], in_use)
    pod_claims = [dx.PodClaim(c.name, c.key, c) for c in claims]
    kwargs = {"allocated_elsewhere": elsewhere} if elsewhere else {}
    classes = {c.name: c for c in classes}
    return dx.analyse_node(node, pod_claims, classes, devices, in_use, counters, capacity_used=capacity_used, **kwargs)


def test_the_issue_example_counts_selector_failures_holders_and_the_one_device_short():
    # node-a: 8 GPUs, 5 with 24Gi (fail the request's selector), 3 with 80Gi of which 2 are held by train-0.
    devices = [gpu(f"gpu-{i}", "24Gi" if i < 5 else "80Gi") for i in range(8)]
    s = gpu_slice("node-a", devices)
    holder = dx.Holder("default/train-0-gpu", ("default/train-0",))
    holders = {DeviceID("gpu.example.com", "node-a", f"gpu-{i}"): [holder] for i in (5, 6)}
    c = claim("train-1-gpu", [exactly("gpu", 2, selectors=(MEMORY_40,))])
    out = explain("node-a", [c], [device_class()], located(s), holders)
    assert out.details == [
        f"8 devices of gpu.example.com; 5 fail `{MEMORY_40}`; 3 match, 2 allocated to default/train-0 "
        "(claim train-0-gpu); request gpu needs 2"
    ]
    assert out.remedies == ["1 more matching device free"]
    (funnel,) = out.to_json()
    assert funnel["free"] == ["node-a/gpu-7"] and funnel["allocated"] == {"default/train-0 (claim train-0-gpu)": 2}


def test_too_few_devices_of_the_class_asks_for_more_devices_not_freed_ones():
    s = gpu_slice("node-a", [gpu("gpu-0"), gpu("gpu-1", "16Gi")])
    c = claim("big", [exactly("gpu", 4, selectors=(MEMORY_40,))])
    out = explain("node-a", [c], [device_class()], located(s))
    assert out.details == [f"2 devices of gpu.example.com; 1 fails `{MEMORY_40}`; 1 match; request gpu needs 4"]
    assert out.remedies == ["3 more devices of gpu.example.com matching request gpu"]


def test_devices_of_other_drivers_are_not_of_the_class_and_a_node_without_slices_says_so():
    nic = gpu_slice("node-a", [{"name": "nic-0"}], driver="nic.example.com")
    c = claim("one", [exactly("gpu")])
    out = explain("node-a", [c], [device_class()], located(nic))
    assert out.details == [
        "no devices of gpu.example.com (none of the 1 device on node-a passes the class's selectors); "
        "request gpu needs 1"
    ]
    assert out.remedies == ["1 more device of gpu.example.com matching request gpu"]
    empty = explain("node-b", [c, claim("two", [exactly("gpu", 2)])], [device_class()], [])
    assert empty.details == ["no ResourceSlice lists devices for this node"]  # once, whatever the requests
    assert empty.remedies == []


def test_untolerated_device_taints_are_counted_and_a_toleration_lets_them_match():
    taint = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
    s = gpu_slice("node-a", [gpu("gpu-0", taints=[taint]), gpu("gpu-1", taints=[{**taint, "effect": "None"}])])
    c = claim("two", [exactly("gpu", 2)])
    out = explain("node-a", [c], [device_class()], located(s))
    assert out.details == [
        "2 devices of gpu.example.com; 1 has the untolerated taint example.com/unhealthy=ecc:NoSchedule; "
        "1 match; request gpu needs 2"
    ]
    tolerant = claim("two", [exactly("gpu", 2, tolerations=[{"key": "example.com/unhealthy", "operator": "Exists"}])])
    assert explain("node-a", [tolerant], [device_class()], located(s)).funnels[0].fits


def test_cel_runtime_errors_are_reported_as_the_allocator_words_them():
    s = gpu_slice("node-a", [{"name": "gpu-0"}])  # no memory capacity: the selector's map lookup fails
    c = claim("one", [exactly("gpu", selectors=(MEMORY_40,))])
    out = explain("node-a", [c], [device_class()], located(s))
    (line,) = out.details
    assert line.startswith("1 device of gpu.example.com; 1 device stops at claim default/one: selector #0: "
                           "CEL runtime error: no such key")  # fmt: skip
    assert out.remedies == ["selectors that do not fail at runtime (guard attributes with has())"]


def test_a_missing_device_class_is_named():
    s = gpu_slice("node-a", [gpu("gpu-0")])
    c = claim("one", [exactly("gpu", cls="gpu.exmaple.com")])
    out = explain("node-a", [c], [device_class()], located(s))
    assert out.details == ["request gpu: device class gpu.exmaple.com does not exist"]
    assert out.remedies == ["a DeviceClass named gpu.exmaple.com"]
    pc = dx.PodClaim("gpu", c.key, c)
    notes = dx.summary([pc], {"gpu.example.com": device_class()}, [out])
    assert notes == [
        "claim default/one, request gpu: device class gpu.exmaple.com does not exist; did you mean gpu.example.com?"
    ]


def test_a_missing_claim_and_a_missing_template_are_explained():
    missing = dx.PodClaim("gpu", "default/train-gpu", None)
    assert dx.summary([missing], {}, []) == [
        "claim default/train-gpu (the pod's gpu) does not exist: the pod waits until it is created"
    ]
    assert dx.summary([missing], {}, [], {"gpu": "default/gpu-template"}) == [
        "claim default/train-gpu (the pod's gpu) cannot be made: ResourceClaimTemplate default/gpu-template "
        "does not exist"
    ]
    out = dx.analyse_node("node-a", [missing], {}, [], lambda d: [], dx.CounterBook([], lambda d: []))
    assert out.details == ["claim default/train-gpu (the pod's gpu) does not exist"]


PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def topology_slices(node: str, accels: dict[str, str], nics: dict[str, str]) -> list:
    """Accelerators and NICs, each with the pcieRoot it hangs from."""

    def devs(kind: str, roots: dict[str, str]) -> list[dict]:
        return [
            {"name": n, "attributes": {PCIE_ROOT: {"string": r}, "kind": {"string": kind}}} for n, r in roots.items()
        ]

    return [
        gpu_slice(node, devs("accelerator", accels), driver="accel.example.com"),
        gpu_slice(node, devs("nic", nics), driver="nic.example.com"),
    ]


def pair_beside_nic() -> object:
    return claim(
        "pair",
        [exactly("accel", 2, cls="accel.example.com"), exactly("nic", 1, cls="nic.example.com")],
        [{"matchAttribute": PCIE_ROOT}],
    )


def test_match_attribute_says_which_root_has_what_and_the_smallest_change():
    slices = topology_slices("node-q", {"a0": "pci0000:00", "a1": "pci0000:80", "a2": "pci0000:80"},
                             {"nic0": "pci0000:00"})  # fmt: skip
    classes = [device_class("accel.example.com"), device_class("nic.example.com")]
    out = explain("node-q", [pair_beside_nic()], classes, located(*slices))
    assert out.details[-1] == (
        f"constraint matchAttribute {PCIE_ROOT} (requests accel, nic): pcieRoot pci0000:00 has 1 of 2 accel free "
        "and 1 of 1 nic free; pcieRoot pci0000:80 has 2 of 2 accel free and 0 of 1 nic free"
    )
    assert out.details[:2] == [
        "3 devices of accel.example.com; 3 match; request accel needs 2",
        "1 device of nic.example.com; 1 match; request nic needs 1",
    ]
    # Both roots are one device short of hardware; the first in order is named, and nothing can be freed.
    assert out.remedies == ["1 more accel device with pcieRoot pci0000:00"]


def test_match_attribute_offers_adding_a_device_and_freeing_the_held_ones():
    # node-p: both cards and the NIC on pci0000:00 are held by train-a; pci0000:80 has two free cards, no NIC.
    slices = topology_slices("node-p", {"a0": "pci0000:00", "a1": "pci0000:00", "a2": "pci0000:80",
                                        "a3": "pci0000:80"}, {"nic0": "pci0000:00"})  # fmt: skip
    holder = dx.Holder("default/train-a-net", ("default/train-a",))
    held = {DeviceID("accel.example.com", "node-p", n): [holder] for n in ("a0", "a1")}
    held[DeviceID("nic.example.com", "node-p", "nic0")] = [holder]
    classes = [device_class("accel.example.com"), device_class("nic.example.com")]
    out = explain("node-p", [pair_beside_nic()], classes, located(*slices), held)
    assert out.details == [
        "4 devices of accel.example.com; 4 match, 2 allocated to default/train-a (claim train-a-net); request accel "
        "needs 2",
        "1 device of nic.example.com; 1 match, 1 allocated to default/train-a (claim train-a-net); request nic needs 1",
        f"constraint matchAttribute {PCIE_ROOT} (requests accel, nic): pcieRoot pci0000:00 has 0 of 2 accel free "
        "and 0 of 1 nic free; pcieRoot pci0000:80 has 2 of 2 accel free and 0 of 1 nic free",
    ]
    # Freeing the NIC alone would not do (its root's cards are held too): the remedies say what would.
    assert out.remedies == [
        "1 more nic device with pcieRoot pci0000:80",
        "2 accel devices and 1 nic device with pcieRoot pci0000:00 freed",
    ]


def test_match_attribute_satisfiable_means_no_constraint_finding():
    slices = topology_slices("node-p", {"a0": "pci0000:00", "a1": "pci0000:00"}, {"nic0": "pci0000:00"})
    classes = [device_class("accel.example.com"), device_class("nic.example.com")]
    out = explain("node-p", [pair_beside_nic()], classes, located(*slices))
    assert all(f.fits for f in out.funnels)
    # Everything fits in this analysis: were the allocator to refuse, the explanation says it cannot pin it down.
    assert out.details == [
        "every request fits on its own and every constraint can be met, but not all at once: the requests "
        "(or the pod's claims) compete for the same devices or counters"
    ]
    assert out.remedies == []


def test_distinct_attribute_counts_the_distinct_values_among_free_devices():
    s = gpu_slice("node-a", [gpu(f"gpu-{i}", attributes={"numa": {"int": i // 2}}) for i in range(4)])
    holder = dx.Holder("default/other", ("default/x",))
    held = {DeviceID("gpu.example.com", "node-a", name): [holder] for name in ("gpu-2", "gpu-3")}
    c = claim("spread", [exactly("gpu", 2)], [{"distinctAttribute": "gpu.example.com/numa"}])
    out = explain("node-a", [c], [device_class()], located(s), held)
    assert out.details[-1] == (
        "constraint distinctAttribute gpu.example.com/numa (requests gpu): the free devices have 1 distinct value "
        "(0), 2 needed"
    )
    assert out.remedies == ["1 more free device with another numa"]


def test_exhausted_counters_block_a_partition_whose_sibling_is_allocated():
    counters = parse_resource_slice(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-a-counters"},
         "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                  "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 2},
                  "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}}
    )  # fmt: skip
    use = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    half = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}]
    devices = gpu_slice(
        "node-a",
        [gpu("gpu-0", "40Gi", consumesCounters=use), gpu("gpu-0-mig-a", "20Gi", consumesCounters=half),
         gpu("gpu-0-mig-b", "20Gi", consumesCounters=half)],
        pool={"name": "node-a", "generation": 1, "resourceSliceCount": 2},
    )  # fmt: skip
    holder = dx.Holder("default/small", ("default/infer",))
    held = {DeviceID("gpu.example.com", "node-a", "gpu-0-mig-a"): [holder]}
    c = claim("whole", [exactly("gpu", selectors=(MEMORY_40,))])
    out = explain("node-a", [c], [device_class()], located(devices), held, slices=[counters, devices])
    assert out.details == [
        f"3 devices of gpu.example.com; 2 fail `{MEMORY_40}`; 1 match; 1 cannot draw from counter set gpu-0 "
        "(memory: 20Gi left, needs 40Gi); request gpu needs 1"
    ]
    assert out.remedies == ["1 more matching device free"]
    book = dx.CounterBook([counters, devices], lambda d: held.get(d, []))
    assert book.left[("gpu.example.com", "node-a", "gpu-0")] == {"memory": Fraction(20 * 2**30)}


def test_first_available_lists_every_subrequest_and_names_the_request_in_the_remedy():
    s = gpu_slice("node-a", [gpu("gpu-0", "24Gi")])
    c = claim(
        "choice",
        [{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.example.com", "count": 2,
             "selectors": [{"cel": {"expression": MEMORY_40}}]},
            {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
        ]}],
    )  # fmt: skip
    out = explain("node-a", [c], [device_class()], located(s))
    assert [f.request for f in out.funnels] == ["gpu/big", "gpu/two"]
    assert out.details == [
        f"1 device of gpu.example.com; 1 fails `{MEMORY_40}`; 0 match; request gpu/big needs 2",
        "1 device of gpu.example.com; 1 match; request gpu/two needs 2",
    ]
    assert out.remedies == ["for request gpu: 1 more device of gpu.example.com matching request gpu/two"]


def test_all_mode_needs_every_matching_device_free():
    s = gpu_slice("node-a", [gpu("gpu-0"), gpu("gpu-1")])
    held = {DeviceID("gpu.example.com", "node-a", "gpu-1"): [dx.Holder("default/x", ("default/p",))]}
    c = claim("all", [exactly("gpu", allocationMode="All")])
    out = explain("node-a", [c], [device_class()], located(s), held)
    assert out.details == [
        "2 devices of gpu.example.com; 2 match, 1 allocated to default/p (claim x); request gpu needs all matching "
        "devices free (allocationMode All)"
    ]
    assert out.remedies == ["1 more matching device free"]


def test_several_claims_name_the_claim_and_the_remedies_join():
    s = gpu_slice("node-a", [gpu("gpu-0")])
    a, b = claim("a", [exactly("gpu", 2)]), claim("b", [exactly("gpu", 3)])
    out = explain("node-a", [a, b], [device_class()], located(s))
    assert out.details == [
        "1 device of gpu.example.com; 1 match; request gpu of claim default/a needs 2",
        "1 device of gpu.example.com; 1 match; request gpu of claim default/b needs 3",
    ]
    assert out.remedies == [
        "1 more device of gpu.example.com matching request gpu and 2 more devices of gpu.example.com matching "
        "request gpu"
    ]


def test_an_allocated_claim_pins_the_pod_to_its_node():
    s = gpu_slice("node-a", [gpu("gpu-0")])
    c = claim("held", [exactly("gpu")])
    c.allocation = object()  # only its presence matters here
    out = explain("node-b", [c], [device_class()], located(s), elsewhere=lambda claim: "node-a")
    assert out.details == ["claim default/held is already allocated, with devices reachable from node-a only"]


def test_summary_counts_devices_matches_and_nodes_that_can_serve():
    classes = {"gpu.example.com": device_class()}
    c = claim("train-1-gpu", [exactly("gpu", 2, selectors=(MEMORY_40,))])
    nodes = []
    for node, memories in (("node-a", ["80Gi", "80Gi", "24Gi"]), ("node-b", ["80Gi"])):
        s = gpu_slice(node, [gpu(f"gpu-{i}", m) for i, m in enumerate(memories)])
        nodes.append(explain(node, [c], list(classes.values()), located(s)))
    notes = dx.summary([dx.PodClaim("gpu", c.key, c)], classes, nodes)
    assert notes == [
        "claim default/train-1-gpu, request gpu (2 of gpu.example.com): 4 devices of the class on 2 nodes, "
        "3 match the request, 3 of them free; enough free for it alone on 1 node"
    ]


@pytest.mark.parametrize(
    ("amount", "text"), [(Fraction(40 * 2**30), "40Gi"), (Fraction(3), "3"), (Fraction(1, 2), "0.5")]
)
def test_quantities_read_as_people_write_them(amount, text):
    assert dx.fraction_text(amount) == text


def test_a_shared_device_without_the_capacity_asked_is_counted_apart():
    s = gpu_slice("node-a", [gpu("gpu-0", allowMultipleAllocations=True)])
    device = DeviceID("gpu.example.com", "node-a", "gpu-0")
    holders = {device: [dx.Holder("default/other", ("default/x",))]}
    used = {device: {"memory": Fraction(60 * 2**30)}}
    c = claim("share", [exactly("gpu", capacity={"requests": {"memory": "40Gi"}})])
    out = explain("node-a", [c], [device_class()], located(s), holders, capacity_used=used)
    assert out.details == ["1 device of gpu.example.com; 1 match; 1 has too little capacity left; request gpu needs 1"]
    assert out.remedies == ["1 more matching device free"]
    small = claim("share", [exactly("gpu", capacity={"requests": {"memory": "20Gi"}})])
    assert explain("node-a", [small], [device_class()], located(s), holders, capacity_used=used).funnels[0].fits


def test_a_tied_request_without_enough_matching_devices_asks_for_devices_not_for_the_constraint():
    slices = topology_slices("node-r", {"a0": "pci0000:00"}, {"nic0": "pci0000:00"})
    classes = [device_class("accel.example.com"), device_class("nic.example.com")]
    out = explain("node-r", [pair_beside_nic()], classes, located(*slices))
    assert out.details == ["1 device of accel.example.com; 1 match; request accel needs 2"]
    assert out.remedies == ["1 more device of accel.example.com matching request accel"]


def test_explain_of_a_filter_error_is_the_error_on_every_node_not_a_traceback():
    """A pool being updated (slices of two generations) is DynamicResources' Error status: the attempt fails as a
    whole with ``running "DynamicResources" filter plugin: ...``. explain ran every filter itself and let the
    error out as a traceback; now each node not rejected before carries the error, as the message does."""
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from accelsched.cli import main

    case = Path(__file__).parent / "conformance_cases" / "dra-generations-ab6d198a8a.yaml"
    out = CliRunner().invoke(main, ["explain", "ns-main/pod-0", "-f", str(case), "-o", "json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    error = "resource pool gpu.example.com/node-2 is currently being updated"
    assert got["message"].startswith('running "DynamicResources" filter plugin: ') and error in got["message"]
    assert got["nodes"] and all(v["filter"] == "DynamicResources" for v in got["nodes"])
    assert all(any(error in r for r in v["reasons"]) for v in got["nodes"])
