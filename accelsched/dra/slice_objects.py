"""A ResourceSlice (``resource.k8s.io/v1``, v1beta2 and v1beta1) parsed and checked as validateResourceSliceSpec does:
its devices, their attributes (fully qualified with the driver), capacities and request policies, and counter
consumption. The public entry point is dra/objects.py's parse_resource_slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from accelsched.api.object_fields import _list, _mapping, _str
from accelsched.api.objects import metadata
from accelsched.dra.model import (
    RESOURCE_SLICE_MAX_DEVICES,
    RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
    RESOURCE_SLICE_MAX_SHARED_COUNTERS,
    CapacityRequestPolicy,
    CapacityRequestPolicyRange,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceCounterConsumption,
    DeviceTaint,
    ResourcePool,
    ResourceSlice,
    Version,
)
from accelsched.dra.object_fields import (
    _CACHE_MAX,
    _SEMVER,
    ATTRIBUTE_VALUE_MAX_LENGTH,
    ATTRIBUTES_AND_CAPACITIES_MAX,
    COUNTER_CONSUMPTIONS_MAX,
    TAINT_EFFECTS,
    TAINTS_MAX,
    V1BETA1,
    VALID_VALUES_MAX,
    _binding_conditions,
    _bool,
    _check_unique,
    _counters,
    _driver,
    _integer,
    _label,
    _label_ok,
    _label_value,
    _node_name,
    _node_selector,
    _pool_name,
    _qualified_label_key,
    _quantity,
    _sized,
    forbidden,
    invalid,
    not_supported,
    qualified_name_problem,
    qualify,
    required,
    too_long,
    too_many,
)
from accelsched.errors import Where


def parse_resource_slice(doc: Mapping[str, Any], source: str = "") -> ResourceSlice:
    """A ResourceSlice (validateResourceSliceSpec), its devices' names fully qualified with the driver."""
    where, name, _, _ = metadata(doc, source, "ResourceSlice", namespaced=False)
    spec = _mapping(where, doc.get("spec"), "spec")
    driver = _driver(where, spec.get("driver"), "spec.driver")
    pool_doc = _mapping(where, spec.get("pool"), "spec.pool")
    pool_name = _pool_name(where, pool_doc.get("name"), "spec.pool.name")
    count = _integer(where, pool_doc.get("resourceSliceCount"), "spec.pool.resourceSliceCount") or 0
    if count <= 0:
        raise where.error("spec.pool.resourceSliceCount", invalid(count, "must be greater than zero"))
    generation = _integer(where, pool_doc.get("generation"), "spec.pool.generation") or 0
    if generation < 0:
        raise where.error("spec.pool.generation", invalid(generation, "must be greater than or equal to zero"))

    set_fields = []
    node_name = node_selector = None
    if spec.get("nodeName") is not None:
        node_name = _str(where, spec["nodeName"], "spec.nodeName")
        if not node_name:
            raise where.error("spec.nodeName", invalid("", "must be either unset or set to a non-empty string"))
        set_fields.append("`nodeName`")
        _node_name(where, node_name, "spec.nodeName")
    if spec.get("nodeSelector") is not None:
        set_fields.append("`nodeSelector`")
        node_selector = _node_selector(where, spec["nodeSelector"], "spec.nodeSelector")
        if len(node_selector) != 1:
            raw_terms = _mapping(where, spec["nodeSelector"], "spec.nodeSelector").get("nodeSelectorTerms")
            raise where.error(
                "spec.nodeSelector.nodeSelectorTerms",
                invalid(_go_node_selector_terms(raw_terms), "must have exactly one node selector term"),
            )
    flags = {}
    for key in ("allNodes", "perDeviceNodeSelection"):
        flag = _bool(where, spec.get(key), f"spec.{key}")
        if flag is False:
            raise where.error(f"spec.{key}", invalid(False, "must be either unset or set to true"))
        if flag:
            set_fields.append(f"`{key}`")
        flags[key] = bool(flag)
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not set_fields:
        raise where.error("spec", required(one_of))
    if len(set_fields) > 1:
        raise where.error("spec", invalid("{" + ", ".join(set_fields) + "}", one_of + ", but multiple fields are set"))

    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        # 1.35+ (KEP-4815): counters live in slices of their own.
        raise where.error("spec", invalid("", "only one of `sharedCounters` or `devices` is allowed"))

    raw_devices = _list(where, spec.get("devices"), "spec.devices")
    beta1 = doc.get("apiVersion") == V1BETA1
    device_docs = [_device_doc(where, d, f"spec.devices[{i}]", beta1) for i, d in enumerate(raw_devices)]
    advanced = any(d.get("taints") or d.get("consumesCounters") for _, d in device_docs)
    maximum = RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if advanced else RESOURCE_SLICE_MAX_DEVICES
    if len(raw_devices) > maximum:
        raise where.error("spec.devices", too_many(len(raw_devices), maximum))
    per_device = flags["perDeviceNodeSelection"]
    devices = tuple(_device(where, d, p, driver, per_device) for p, d in device_docs)
    _check_unique(where, [d.name for d in devices], "spec.devices")

    counter_sets = []
    raw_sets = _sized(where, spec.get("sharedCounters"), "spec.sharedCounters", RESOURCE_SLICE_MAX_SHARED_COUNTERS)
    for i, item in enumerate(raw_sets):
        p = f"spec.sharedCounters[{i}]"
        item = _mapping(where, item, p)
        set_name = _str(where, item.get("name"), f"{p}.name")
        if not set_name:
            raise where.error(f"{p}.name", required())
        _label(where, set_name, f"{p}.name")
        counter_sets.append(CounterSet(set_name, _counters(where, item.get("counters"), f"{p}.counters")))
    _check_unique(where, [c.name for c in counter_sets], "spec.sharedCounters")

    return ResourceSlice(
        name=name,
        driver=driver,
        pool=ResourcePool(pool_name, generation, count),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=flags["allNodes"],
        per_device_node_selection=per_device,
        devices=devices,
        shared_counters=tuple(counter_sets),
        source=source,
        raw=dict(doc),
    )


def _device_doc(where: Where, value: Any, path: str, beta1: bool) -> tuple[str, Mapping[str, Any]]:
    """A device's fields and the path errors name (v1beta1 wraps them in ``basic``; the internal type does not)."""
    device = _mapping(where, value, path)
    if beta1 and device.get("basic") is not None:
        return path, {"name": device.get("name"), **_mapping(where, device["basic"], f"{path}.basic")}
    return path, device


# Qualified attribute and capacity names, and plain capacities, already seen: a slice repeats the same few.
_QUALIFIED: dict[tuple[str, str], str] = {}
_CAPACITIES: dict[tuple[type, Any], DeviceCapacity] = {}


def _qualified(where: Where, key: Any, driver: str, path: str, what: str) -> str:
    """``key`` checked (validateQualifiedName, reported at the map's path) and qualified with the driver."""
    try:
        return _QUALIFIED[(key, driver)]
    except (KeyError, TypeError):
        pass
    key = str(key)
    problem = qualified_name_problem(key)
    if problem:
        raise where.error(f"{path}.{what}", problem)
    name = qualify(key, driver)
    if len(_QUALIFIED) < _CACHE_MAX:
        _QUALIFIED[(key, driver)] = name
    return name


def _plain_attribute(attr: Any) -> Any:
    """The value of a well-formed one-value int, bool or short ASCII string attribute, else None (then the full
    check runs): most attributes, read without building a path."""
    if type(attr) is not dict or len(attr) != 1:
        return None
    ((kind, raw),) = attr.items()
    t = type(raw)
    if (kind == "int" and t is int) or (kind == "bool" and t is bool):
        return raw
    if kind == "string" and t is str and len(raw) <= ATTRIBUTE_VALUE_MAX_LENGTH and raw.isascii():
        return raw
    return None


def _device(where: Where, dev: Mapping[str, Any], path: str, driver: str, per_device: bool) -> Device:
    """One device (validateDevice). Paths are built only for what is wrong: a slice may hold 128 devices and a
    cluster thousands of slices."""
    name = dev.get("name")
    if type(name) is not str or not _label_ok(name):
        name = _label(where, name, f"{path}.name")
    raw_attrs = dev.get("attributes")
    if type(raw_attrs) is not dict:
        raw_attrs = _mapping(where, raw_attrs, f"{path}.attributes")
    raw_caps = dev.get("capacity")
    if type(raw_caps) is not dict:
        raw_caps = _mapping(where, raw_caps, f"{path}.capacity")
    total = len(raw_attrs) + len(raw_caps)
    if total > ATTRIBUTES_AND_CAPACITIES_MAX:
        raise where.error(
            path,
            invalid(
                total, f"the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITIES_MAX}"
            ),
        )
    attributes = {}
    for key, attr in raw_attrs.items():
        qualified = _qualified(where, key, driver, path, "attributes")
        value = _plain_attribute(attr)
        attributes[qualified] = _attribute(where, attr, f"{path}.attributes[{key}]") if value is None else value
    multiple = dev.get("allowMultipleAllocations")
    if multiple is not None:
        multiple = _bool(where, multiple, f"{path}.allowMultipleAllocations")
    multiple = bool(multiple)
    capacity = {}
    for key, cap in raw_caps.items():
        _qualified(where, key, driver, path, "capacity")  # validated; stored as written (see the module docstring)
        written = str(key)
        simple = type(cap) is dict and len(cap) == 1 and type(cap.get("value")) in (str, int)
        plain = _CAPACITIES.get((type(cap["value"]), cap["value"])) if simple else None
        if plain is None:
            plain = _capacity(where, cap, f"{path}.capacity[{key}]", multiple)
            if simple and len(_CAPACITIES) < _CACHE_MAX:
                _CAPACITIES[(type(cap["value"]), cap["value"])] = plain
        capacity[written] = plain

    taints = []
    for i, item in enumerate(
        _sized(where, dev.get("taints"), f"{path}.taints", TAINTS_MAX) if dev.get("taints") else ()
    ):
        p = f"{path}.taints[{i}]"
        item = _mapping(where, item, p)
        key = _str(where, item.get("key"), f"{p}.key")
        if not key:
            raise where.error(f"{p}.key", required())
        _qualified_label_key(where, key, f"{p}.key")
        value = _str(where, item.get("value"), f"{p}.value")
        if value:
            _label_value(where, value, f"{p}.value")
        effect = _str(where, item.get("effect"), f"{p}.effect")
        if not effect:
            raise where.error(f"{p}.effect", required())
        if effect not in TAINT_EFFECTS:
            raise where.error(f"{p}.effect", not_supported(effect, TAINT_EFFECTS))
        taints.append(DeviceTaint(key, value, effect, _str(where, item.get("timeAdded"), f"{p}.timeAdded")))

    consumes = []
    p = f"{path}.consumesCounters"
    raw_consumes = dev.get("consumesCounters")
    for i, item in enumerate(_sized(where, raw_consumes, p, COUNTER_CONSUMPTIONS_MAX) if raw_consumes else ()):
        item = _mapping(where, item, f"{p}[{i}]")
        counter_set = _str(where, item.get("counterSet"), f"{p}[{i}].counterSet")
        if not counter_set:
            raise where.error(f"{p}[{i}].counterSet", required())
        _label(where, counter_set, f"{p}[{i}].counterSet")
        consumes.append(
            DeviceCounterConsumption(counter_set, _counters(where, item.get("counters"), f"{p}[{i}].counters"))
        )
    if len(consumes) > 1:
        _check_unique(where, [c.counter_set for c in consumes], p)

    node_name = node_selector = all_nodes = None
    placed = [k for k in ("nodeName", "nodeSelector", "allNodes") if dev.get(k) is not None]
    if per_device:
        set_fields = []
        if dev.get("nodeName") is not None:
            node_name = _str(where, dev["nodeName"], f"{path}.nodeName")
            if not node_name:
                raise where.error(f"{path}.nodeName", invalid("", "must not be empty"))
            set_fields.append("`nodeName`")
            _node_name(where, node_name, f"{path}.nodeName")
        if dev.get("nodeSelector") is not None:
            set_fields.append("`nodeSelector`")
            node_selector = _node_selector(where, dev["nodeSelector"], f"{path}.nodeSelector")
        if dev.get("allNodes") is not None:
            all_nodes = _bool(where, dev["allNodes"], f"{path}.allNodes")
            if not all_nodes:
                raise where.error(f"{path}.allNodes", invalid(False, "must be either unset or set to true"))
            set_fields.append("`allNodes`")
        one_of = (
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"
        )
        if not set_fields:
            raise where.error(path, required(one_of))
        if len(set_fields) > 1:
            raise where.error(path, invalid("{" + ", ".join(set_fields) + "}", one_of))
    elif placed:
        raise where.error(
            path,
            invalid(
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
                "is set to true in the ResourceSlice spec",
            ),
        )

    conditions = failures = ()
    if dev.get("bindingConditions") or dev.get("bindingFailureConditions"):
        conditions, failures = _binding_conditions(where, dev, path)
    return Device(
        name=name,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        taints=tuple(taints),
        binds_to_node=dev.get("bindsToNode") is not None
        and bool(_bool(where, dev["bindsToNode"], f"{path}.bindsToNode")),
        binding_conditions=conditions,
        binding_failure_conditions=failures,
        allow_multiple_allocations=multiple,
    )


def _attribute(where: Where, value: Any, path: str) -> Any:
    """validateDeviceAttribute: exactly one of bool, int, string (<= 64 bytes), version (semver 2.0.0).

    The list forms (bools, ints, strings, versions) sit behind the alpha gate DRAListTypeAttributes, off in 1.36:
    the API server drops them before validating, so they count as not set."""
    attr = _mapping(where, value, path)
    present = [k for k in ("bool", "int", "string", "version") if attr.get(k) is not None]
    if not present:
        raise where.error(path, invalid("", "exactly one value must be specified"))
    if len(present) > 1:
        raise where.error(path, invalid(_go_attribute(attr), "exactly one value must be specified"))
    kind = present[0]
    raw = attr[kind]
    if kind == "bool":
        return _bool(where, raw, f"{path}.bool")
    if kind == "int":
        return _integer(where, raw, f"{path}.int")
    text = _str(where, raw, f"{path}.{kind}")
    if kind == "version" and not _SEMVER.fullmatch(text):
        raise where.error(f"{path}.version", invalid(text, "must be a string compatible with semver.org spec 2.0.0"))
    if len(text.encode()) > ATTRIBUTE_VALUE_MAX_LENGTH:
        raise where.error(f"{path}.{kind}", too_long(ATTRIBUTE_VALUE_MAX_LENGTH))
    return Version(text) if kind == "version" else text


def _go_attribute(attr: Mapping[str, Any]) -> dict[str, Any]:
    """The attribute as the API server shows a bad one: its internal struct, Go field names, unset fields null
    (confirmed against kube-apiserver 1.36.3)."""
    return {
        go: attr.get(key) if key in ("int", "bool", "string", "version") else None
        for go, key in (("IntValue", "int"), ("BoolValue", "bool"), ("StringValue", "string"),
                        ("VersionValue", "version"), ("IntValues", ""), ("BoolValues", ""), ("StringValues", ""),
                        ("VersionValues", ""))
    }  # fmt: skip


def _go_node_selector_terms(terms: Any) -> Any:
    """Node selector terms as the API server shows them in an error: the internal structs, Go field names."""

    def requirements(reqs: Any) -> Any:
        if not isinstance(reqs, list):
            return None
        return [
            {"Key": r.get("key", ""), "Operator": r.get("operator", ""), "Values": r.get("values")}
            for r in reqs
            if isinstance(r, Mapping)
        ]

    if not isinstance(terms, list):
        return terms
    return [
        {"MatchExpressions": requirements(t.get("matchExpressions")), "MatchFields": requirements(t.get("matchFields"))}
        for t in terms
        if isinstance(t, Mapping)
    ]


def _capacity(where: Where, value: Any, path: str, multiple: bool) -> DeviceCapacity:
    cap = _mapping(where, value, path)
    raw_value = cap.get("value")
    amount = _quantity(where, raw_value, f"{path}.value")
    if cap.get("requestPolicy") is None:
        return DeviceCapacity(amount)
    p = f"{path}.requestPolicy"
    if not multiple:
        raise where.error(p, forbidden("allowMultipleAllocations must be true"))
    return DeviceCapacity(
        amount, _request_policy(where, _mapping(where, cap["requestPolicy"], p), p, amount, str(raw_value))
    )


def _request_policy(
    where: Where, policy: Mapping[str, Any], path: str, maximum: Fraction, maximum_text: str
) -> CapacityRequestPolicy:
    """validateRequestPolicy: validValues or validRange (not both), each needing a default inside it."""
    default_raw = policy.get("default")
    default = None if default_raw is None else _quantity(where, default_raw, f"{path}.default")
    raw_values = _list(where, policy.get("validValues"), f"{path}.validValues")
    values = tuple(_quantity(where, v, f"{path}.validValues[{i}]") for i, v in enumerate(raw_values))
    raw_range = policy.get("validRange")
    if values and raw_range is not None:
        raise where.error(
            path,
            forbidden(
                'exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time'
            ),
        )
    valid_range = None
    if values:
        vp = f"{path}.validValues"
        if default is None:
            raise where.error(f"{path}.default", required("required when validValues is defined"))
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                raise where.error(
                    f"{vp}[{i + 1}]", invalid(str(raw_values[i + 1]), "values must be sorted in ascending order")
                )
        if len(values) > VALID_VALUES_MAX:
            raise where.error(vp, too_many(len(values), VALID_VALUES_MAX))
        for i, v in enumerate(values):
            if v > maximum:
                raise where.error(
                    f"{vp}[{i}]", invalid(str(raw_values[i]), f"option is larger than capacity value: {maximum_text}")
                )
        _check_unique(where, list(values), vp)
        if default not in values:
            raise where.error(
                vp, invalid(str(default_raw), "default value is not valid according to the requestPolicy")
            )
    elif raw_range is not None:
        rp = f"{path}.validRange"
        rng = _mapping(where, raw_range, rp)
        if default is None:
            raise where.error(f"{path}.default", required("required when validRange is defined"))
        if rng.get("min") is None:
            raise where.error(f"{rp}.min", required("required when validRange is defined"))
        texts = {k: str(rng[k]) for k in ("min", "max", "step") if rng.get(k) is not None}
        low = _quantity(where, rng["min"], f"{rp}.min")
        high = None if rng.get("max") is None else _quantity(where, rng["max"], f"{rp}.max")
        step = None if rng.get("step") is None else _quantity(where, rng["step"], f"{rp}.step")
        checks = [
            (low > maximum, "min", texts["min"], f"min is larger than capacity value: {maximum_text}"),
            (default < low, "min", str(default_raw), f"default is less than min: {texts['min']}"),
        ]
        if high is not None:
            checks += [
                (low > high, "max", texts["min"], f"min is larger than max: {texts['max']}"),
                (high > maximum, "max", texts["max"], f"max is larger than capacity value: {maximum_text}"),
                (default > high, "max", str(default_raw), f"default is more than max: {texts['max']}"),
            ]
        if step is not None:
            checks.append(
                (
                    low + step > maximum,
                    "step",
                    texts["step"],
                    f"one step {_fraction_text(low + step)} is larger than capacity value: {maximum_text}",
                )
            )
            # validateRequestPolicyRangeStep works on Quantity.Value(): integers, rounded up.
            multiple_of = f"value is not a multiple of a given step ({texts['step']}) from ({texts['min']})"
            step_int = _ceil(step)
            for value, text in ((default, str(default_raw)), (high, texts.get("max"))):
                if value is not None and step_int and (_ceil(value) - _ceil(low)) % step_int:
                    checks.append((True, "step", text, multiple_of))
        for failed, key, shown, detail in checks:
            if failed:
                raise where.error(f"{rp}.{key}", invalid(shown, detail))
        valid_range = CapacityRequestPolicyRange(low, high, step)
    return CapacityRequestPolicy(default, values, valid_range)


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))
