"""Fractional accelerators: per physical device, how it is split and what is in use.

One ledger per node, configured by the node annotation ``accelsched.io/partitioning`` (YAML):

    mode: mig                 # mig | slices | timeslicing | milli
    devices: 8                # how many physical devices (IDs gpu-0..), or a list of IDs
    # mode mig
    model: A100-40GB          # A100-40GB, A100-80GB, H100-80GB
    strategy: mixed           # mixed: nvidia.com/mig-<profile>; single: nvidia.com/gpu, all of one profile
    profile: 1g.5gb           # the single strategy's profile
    dynamic: true             # accelsched places new instances (HAMi/Volcano style); false: only listed ones
    instances: {gpu-0: [3g.20gb@0, 2g.10gb@4, 1g.5gb@6]}   # instances the operator created (fixed mode)
    # mode slices: a device is `units` interchangeable slices of `resource`; a request takes them on one device
    resource: example.com/accel-slice
    units: 8
    # mode timeslicing: each device is advertised `replicas` times as <id>::<n> (NVIDIA time-slicing)
    replicas: 4
    # mode milli: shares of one device in thousandths (the Alibaba trace's gpu_milli), requested as the
    # extended resource accelsched.io/gpu-milli (<= 1000, on one device); nvidia.com/gpu takes whole free devices

Allocation results name what the device plugin will hand out: ``gpu-0:3g.20gb@4`` (device, profile, start
slot), ``gpu-1:slices=2-4``, ``gpu-0::3`` (a time-slicing replica), ``gpu-2:milli=250``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelsched.api import limits
from accelsched.api.annotations import yaml_annotation
from accelsched.devices import mig
from accelsched.errors import Where

PARTITION_ANNOTATION = "accelsched.io/partitioning"
MILLI_RESOURCE = "accelsched.io/gpu-milli"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
MODES = ("mig", "slices", "timeslicing", "milli")
POLICIES = ("binpack", "spread")
MILLI = 1000
# CycleState key: a score plugin that also decides which device a sharing pod takes (FGDScore's per-GPU choice)
# leaves a function node index -> device index (or None) here; DeviceAllocation asks it at Reserve.
DEVICE_CHOICE = "DeviceChoice"


@dataclass
class Partition:
    """The partitioning of one node's devices and what each device has in use."""

    mode: str
    devices: list[str]
    model: mig.Model | None = None
    strategy: str = "mixed"
    profile: str = ""
    dynamic: bool = True
    resource: str = GPU_RESOURCE
    units: int = 1
    replicas: int = 1
    # Per device: MIG instances (with the pod holding each, "" when free), used slice units / replicas / milli.
    instances: list[list[tuple[mig.Instance, str]]] = field(default_factory=list)
    used: list[set[int]] = field(default_factory=list)
    milli: list[int] = field(default_factory=list)
    fixed: list[list[mig.Instance]] = field(default_factory=list)  # the operator's instances, kept when freed

    # ------------------------------------------------------------------------------------ what it serves

    @property
    def total_units(self) -> int:
        """Capacity per device in this mode's unit (slices, replicas, milli), for utilization and fragmentation."""
        per = {"mig": mig.SLICES, "slices": self.units, "timeslicing": self.replicas, "milli": MILLI}[self.mode]
        return per * len(self.devices)

    def resource_profile(self, resource: str) -> str | None:
        """The MIG profile a resource name asks for on this node (None: not a MIG resource here)."""
        if self.mode != "mig":
            return None
        if self.strategy == "single":
            return self.profile if resource == GPU_RESOURCE else None
        if resource.startswith(MIG_PREFIX):
            # A profile this GPU model lacks is not served here: the node does not advertise it, so
            # NodeResourcesFit alone answers (Insufficient), as kube-scheduler would.
            profile = resource[len(MIG_PREFIX) :]
            return profile if self.model is not None and profile in self.model.profiles else None
        return None

    def manages(self, resource: str) -> bool:
        if self.mode == "mig":
            return self.resource_profile(resource) is not None
        if self.mode == "milli":
            return resource in (MILLI_RESOURCE, GPU_RESOURCE)
        return resource == self.resource

    def capacity(self) -> dict[str, int]:
        """What the node advertises (the count check's upper bound; the exact check is ``fits``)."""
        n = len(self.devices)
        if self.mode == "mig":
            assert self.model is not None
            profiles = [self.profile] if self.strategy == "single" else list(self.model.profiles)
            out = {}
            for name in profiles:
                if self.dynamic:
                    count = self.model.profiles[name].max_count * n
                else:
                    count = sum(1 for dev in self.instances for inst, _ in dev if inst.profile == name)
                out[GPU_RESOURCE if self.strategy == "single" else MIG_PREFIX + name] = count
            return out
        if self.mode == "milli":
            return {MILLI_RESOURCE: MILLI * n, GPU_RESOURCE: n}
        if self.mode == "slices":
            return {self.resource: self.units * n}
        return {self.resource: self.replicas * n}

    # ------------------------------------------------------------------------------------ fit

    def free_units(self, d: int) -> int:
        """Units of device d no pod holds (for MIG: slices outside every instance a pod holds)."""
        if self.mode == "mig":
            return mig.SLICES - sum(i.size for i, owner in self.instances[d] if owner)
        if self.mode == "milli":
            return MILLI - self.milli[d]
        return (self.units if self.mode == "slices" else self.replicas) - len(self.used[d])

    def units_of(self, requests: Mapping[str, int]) -> int:
        """How many units (slices, replicas, milli) ``requests`` take here."""
        total = 0
        for resource, amount in requests.items():
            if not self.manages(resource):
                continue
            profile = self.resource_profile(resource)
            if profile is not None:
                assert self.model is not None
                total += self.model.profiles[profile].size * amount
            elif self.mode == "milli" and resource == GPU_RESOURCE:
                total += MILLI * amount
            else:
                total += amount
        return total

    def fits(self, requests: Mapping[str, int]) -> bool:
        managed = [(r, a) for r, a in requests.items() if a > 0 and self.manages(r)]
        if len(managed) == 1 and managed[0][1] == 1 and self.mode == "mig":
            # One instance: some device has a free instance of the profile, or room to carve one.
            profile = self.resource_profile(managed[0][0])
            assert self.model is not None and profile is not None
            return any(
                any(i.profile == profile and not o for i, o in dev)
                or (self.dynamic and _placements(self.model.name, tuple(i for i, _ in dev), profile))
                for dev in self.instances
            )
        if len(managed) == 1 and self.mode == "milli":
            # One resource on a sharing node: plan's own test without its trial copy (DefaultPreemption asks this
            # for every victim it tries to reprieve).
            resource, amount = managed[0]
            if resource == MILLI_RESOURCE:
                return amount <= MILLI and any(MILLI - used >= amount for used in self.milli)
            return sum(1 for used in self.milli if used == 0) >= amount
        try:
            self.plan(requests, "binpack")
        except ValueError:
            return False
        return True

    def plan(self, requests: Mapping[str, int], policy: str | int) -> list[tuple[int, str, Any]]:
        """The allocation for ``requests``, without taking it: (device, resource, what) per unit of request.
        Raises ValueError saying why it cannot be placed."""
        trial = self.copy()
        steps: list[tuple[int, str, Any]] = []
        for resource, amount in sorted(requests.items()):
            if amount <= 0 or not self.manages(resource):
                continue
            for step in trial._plan_one(resource, amount, policy):
                steps.append(step)
                trial._take(*step, owner="?")
        return steps

    def _order(self, candidates: list[int], policy: str | int) -> list[int]:
        """Devices to try: binpack fills the fullest device first, spread the emptiest (ties: lowest index). A
        device index (a plugin's choice) goes first when it is a candidate, then binpack's order."""
        if isinstance(policy, int):
            return sorted(candidates, key=lambda d: (d != policy, self.free_units(d), d))
        sign = 1 if policy == "binpack" else -1
        return sorted(candidates, key=lambda d: (sign * self.free_units(d), d))

    def _plan_one(self, resource: str, amount: int, policy: str | int) -> list[tuple[int, str, Any]]:
        if self.mode == "mig":
            return self._plan_mig(resource, amount, policy if isinstance(policy, str) else "binpack")
        if self.mode == "milli" and resource == MILLI_RESOURCE:
            if amount > MILLI:
                raise ValueError(
                    f"{amount} {MILLI_RESOURCE} is more than one device ({MILLI}); ask for whole {GPU_RESOURCE}"
                )
            fit = [d for d in range(len(self.devices)) if MILLI - self.milli[d] >= amount]
            if not fit:
                raise ValueError(f"no device with {amount} free {MILLI_RESOURCE}")
            return [(self._order(fit, policy)[0], resource, amount)]
        if self.mode == "milli":  # whole devices on a sharing node: only fully free ones
            free = [d for d in range(len(self.devices)) if self.milli[d] == 0]
            if len(free) < amount:
                raise ValueError(f"{len(free)} whole {GPU_RESOURCE} free, {amount} requested")
            return [(d, resource, MILLI) for d in free[:amount]]
        if self.mode == "slices":
            fit = [d for d in range(len(self.devices)) if self.free_units(d) >= amount]
            if not fit:
                unit = self.resource.rsplit("/", 1)[-1]
                raise ValueError(f"no device with {amount} free {unit} units")
            d = self._order(fit, policy)[0]
            taken = sorted(set(range(self.units)) - self.used[d])[:amount]
            return [(d, resource, tuple(taken))]
        # timeslicing: one replica per unit, devices chosen by policy one replica at a time
        steps: list[tuple[int, str, Any]] = []
        trial = self.copy()
        for _ in range(amount):
            fit = [d for d in range(len(self.devices)) if trial.free_units(d) > 0]
            if not fit:
                raise ValueError(f"no free {resource} replica")
            d = trial._order(fit, policy)[0]
            replica = min(set(range(self.replicas)) - trial.used[d])
            trial.used[d].add(replica)
            steps.append((d, resource, replica))
        return steps

    def _plan_mig(self, resource: str, amount: int, policy: str) -> list[tuple[int, str, Any]]:
        assert self.model is not None
        profile = self.resource_profile(resource)
        assert profile is not None
        steps: list[tuple[int, str, Any]] = []
        trial = self.copy()
        for _ in range(amount):
            existing = [
                (d, inst)
                for d, dev in enumerate(trial.instances)
                for inst, owner in dev
                if not owner and inst.profile == profile
            ]
            if existing:  # a free instance the operator (or an earlier pod) created: use it before carving
                d, inst = min(existing, key=lambda di: (trial._rank(di[0], policy), di[1].start))
            elif trial.dynamic:
                options = []
                for d, dev in enumerate(trial.instances):
                    start = _choose(self.model.name, tuple(i for i, _ in dev), profile)
                    if start is not None:
                        options.append((trial._rank(d, policy), d, start))
                if not options:
                    raise ValueError(trial.why_not_mig(profile))
                _, d, start = min(options)
                size = self.model.profiles[profile].size
                inst = mig.Instance(profile, start, size)
                trial.instances[d].append((inst, ""))
            else:
                raise ValueError(f"no free {profile} instance (fixed partitions: {self.describe_instances()})")
            trial._take(d, resource, inst, owner="?")
            steps.append((d, resource, inst))
        return steps

    def _rank(self, d: int, policy: str) -> int:
        return self.free_units(d) if policy == "binpack" else -self.free_units(d)

    def why_not_mig(self, profile: str) -> str:
        """The first device's reason (they usually agree), e.g. no free 3g.20gb placement: slices 0-1 free ..."""
        assert self.model is not None
        reasons = [mig.why_not(self.model, [i for i, _ in dev], profile) for dev in self.instances]
        return (
            reasons[0]
            if len(set(reasons)) == 1
            else "; ".join(f"{self.devices[d]}: {r}" for d, r in enumerate(reasons))
        )

    def describe_instances(self) -> str:
        parts = []
        for d, dev in enumerate(self.instances):
            if dev:
                parts.append(f"{self.devices[d]} " + ",".join(f"{i}{'*' if o else ''}" for i, o in dev))
        return "; ".join(parts) or "none"

    # ------------------------------------------------------------------------------------ take / give back

    def _take(self, d: int, resource: str, what: Any, owner: str) -> str:
        if self.mode == "mig":
            for k, (inst, held) in enumerate(self.instances[d]):
                if inst == what and not held:
                    self.instances[d][k] = (inst, owner)
                    return f"{self.devices[d]}:{inst}"
            self.instances[d].append((what, owner))  # a new dynamic instance
            return f"{self.devices[d]}:{what}"
        if self.mode == "milli":
            self.milli[d] += what
            return f"{self.devices[d]}:milli={what}" if resource == MILLI_RESOURCE else self.devices[d]
        if self.mode == "slices":
            self.used[d].update(what)
            return f"{self.devices[d]}:slices={what[0]}-{what[-1]}"
        self.used[d].add(what)
        return f"{self.devices[d]}::{what}"

    def allocate(self, requests: Mapping[str, int], policy: str | int, owner: str) -> dict[str, list[str]]:
        """Take what ``plan`` chose; returns the allocated IDs per resource. All or nothing."""
        steps = self.plan(requests, policy)
        out: dict[str, list[str]] = {}
        for d, resource, what in steps:
            out.setdefault(resource, []).append(self._take(d, resource, what, owner))
        return out

    def claim(self, devices: Mapping[str, Sequence[str]], owner: str) -> None:
        """Mark the IDs a bound pod holds (its accelsched.io/devices annotation) as used: all or nothing, and
        never on top of what another pod holds (an overlapping instance, a taken replica, over 1000 milli)."""
        trial = self.copy()
        for resource, ids in devices.items():
            for ident in ids:
                d, what = trial._parse_id(resource, ident)
                problem = trial._conflict(d, resource, what)
                if problem:
                    raise ValueError(f"{ident}: {problem}")
                trial._take(d, resource, what, owner)
        self.instances, self.used, self.milli = trial.instances, trial.used, trial.milli

    def _conflict(self, d: int, resource: str, what: Any) -> str | None:
        if self.mode == "mig":
            assert self.model is not None
            if any(i == what and not o for i, o in self.instances[d]):
                return None  # a free instance that exists
            if not self.dynamic:
                return "no such free instance"
            held = [inst for inst, owner in self.instances[d] if inst != what or owner]
            try:
                mig.check_layout(self.model, [*held, what])
            except ValueError as exc:
                return str(exc)
            return None
        if self.mode == "milli":
            amount = what if resource == MILLI_RESOURCE else MILLI
            return None if self.milli[d] + amount <= MILLI else f"only {MILLI - self.milli[d]} milli free"
        taken = set(what) if self.mode == "slices" else {what}
        return f"already held: {sorted(taken & self.used[d])}" if taken & self.used[d] else None

    def release(self, devices: Mapping[str, Sequence[str]]) -> None:
        for resource, ids in devices.items():
            if not self.manages(resource):
                continue
            for ident in ids:
                d, what = self._parse_id(resource, ident)
                if self.mode == "mig":
                    kept = []
                    for inst, held in self.instances[d]:
                        if inst == what:
                            if not self.dynamic or inst in self.fixed[d]:
                                kept.append((inst, ""))  # an operator's instance stays, now free
                            continue  # a dynamic instance is destroyed with its pod
                        kept.append((inst, held))
                    self.instances[d] = kept
                elif self.mode == "milli":
                    self.milli[d] -= what
                elif self.mode == "slices":
                    self.used[d].difference_update(what)
                else:
                    self.used[d].discard(what)

    def _parse_id(self, resource: str, ident: str) -> tuple[int, Any]:
        dev, _, rest = ident.partition(":")
        if dev not in self.devices:
            raise ValueError(f"{ident}: unknown device {dev!r}")
        d = self.devices.index(dev)
        try:
            if self.mode == "mig":
                assert self.model is not None
                return d, mig.parse_instance(self.model, rest)
            if self.mode == "milli":
                return d, int(rest.removeprefix("milli=")) if rest else MILLI
            if self.mode == "slices":
                lo, hi = rest.removeprefix("slices=").split("-")
                return d, tuple(range(int(lo), int(hi) + 1))
            return d, int(rest.removeprefix(":"))
        except (ValueError, AssertionError):
            raise ValueError(f"{ident!r} is not a {self.mode} allocation ID for {resource}") from None

    def copy(self) -> Partition:
        return Partition(
            self.mode,
            self.devices,
            self.model,
            self.strategy,
            self.profile,
            self.dynamic,
            self.resource,
            self.units,
            self.replicas,
            [list(dev) for dev in self.instances],
            [set(u) for u in self.used],
            list(self.milli),
            self.fixed,
        )

    # ------------------------------------------------------------------------------------ measures

    def used_units(self) -> int:
        return self.total_units - sum(self.free_units(d) for d in range(len(self.devices)))

    def fragmentation(self, typical: Sequence[Mapping[str, int]]) -> int:
        """Free units (slices, replicas, milli) that none of the typical requests could use now."""
        total = 0
        for d in range(len(self.devices)):
            free = self.free_units(d)
            if not free:
                continue
            if self.mode == "mig":
                assert self.model is not None
                profiles = [p for req in typical for r in req if (p := self.resource_profile(r))]
                if self.dynamic:
                    total += mig.fragmentation(self.model, [i for i, _ in self.instances[d]], profiles or None)
                else:  # fixed: only free instances of a requested profile are usable
                    usable = sum(
                        i.size for i, o in self.instances[d] if not o and (not profiles or i.profile in profiles)
                    )
                    total += free - usable
                continue
            # The smallest typical request in this mode's units (a whole GPU is 1000 milli).
            smallest = min(
                (self.units_of({r: a}) for req in typical for r, a in req.items() if self.manages(r) and a > 0),
                default=None,
            )
            if smallest is not None and free < smallest:
                total += free
        return total


UNIT_NAMES = {"mig": "slices", "slices": "slices", "timeslicing": "replicas", "milli": "milli"}


def cluster_fragmentation(partitions: Sequence[Partition], typical: Sequence[Mapping[str, int]]) -> tuple[int, int]:
    """(fragmented free units, free units) over all partitioned nodes, for the typical requests."""
    frag = sum(p.fragmentation(typical) for p in partitions)
    free = sum(p.total_units - p.used_units() for p in partitions)
    return frag, free


@functools.lru_cache(maxsize=65536)
def _choose(model: str, instances: tuple[mig.Instance, ...], profile: str) -> int | None:
    """mig.choose, memoized: devices repeat the same few layouts, and the packing rule looks ahead."""
    return mig.choose(mig.model(model), list(instances), profile)


@functools.lru_cache(maxsize=65536)
def _placements(model: str, instances: tuple[mig.Instance, ...], profile: str) -> bool:
    return bool(mig.placements(mig.model(model), list(instances), profile))


def request_problem(partitions: Sequence[Partition], resource: str, amount: int) -> str | None:
    """Why no partitioned node could ever serve this request (a bad request, not a busy cluster), or None."""
    managing = [p for p in partitions if p.manages(resource)]
    if not managing:
        return None
    if resource == MILLI_RESOURCE and amount > MILLI:
        return f"{amount} is more than one device ({MILLI} milli); ask for whole {GPU_RESOURCE} instead"
    slices = [p for p in managing if p.mode == "slices"]
    if slices and amount > max(p.units for p in slices):
        return f"{amount} slices is more than a device has ({max(p.units for p in slices)})"
    return None


def parse(where: Where, text: str, node_devices: Mapping[str, list[str]]) -> Partition:
    """The node annotation, validated: unknown modes, models, profiles or sizes are errors naming the field."""
    path = f"metadata.annotations[{PARTITION_ANNOTATION}]"
    known = {"mode", "devices", "model", "strategy", "profile", "dynamic", "instances", "resource", "units", "replicas"}
    doc = yaml_annotation(where, PARTITION_ANNOTATION, text, known, "mode, devices, ...")
    mode = doc.get("mode")
    if mode not in MODES:
        raise where.error(f"{path}.mode", f"unknown mode {mode!r} ({', '.join(MODES)})")
    devices = doc.get("devices", node_devices.get(GPU_RESOURCE) or 1)
    if isinstance(devices, int) and not isinstance(devices, bool):
        if devices < 1:
            raise where.error(f"{path}.devices", f"must be >= 1, got {devices}")
        problem = limits.exceeded("devices", devices, "devices")
        if problem:
            raise where.error(f"{path}.devices", problem)
        devices = [f"gpu-{i}" for i in range(devices)]
    if (
        not isinstance(devices, list)
        or not all(isinstance(d, str) and d for d in devices)
        or len(set(devices)) != len(devices)
    ):
        raise where.error(f"{path}.devices", "must be a device count or a list of distinct device IDs")
    problem = limits.exceeded("devices", len(devices), "devices")
    if problem:
        raise where.error(f"{path}.devices", problem)
    part = Partition(mode, list(devices))
    part.instances = [[] for _ in devices]
    part.used = [set() for _ in devices]
    part.milli = [0] * len(devices)
    if mode == "mig":
        try:
            part.model = mig.model(str(doc.get("model", "")))
        except ValueError as exc:
            raise where.error(f"{path}.model", str(exc)) from None
        part.strategy = doc.get("strategy", "mixed")
        if part.strategy not in ("mixed", "single"):
            raise where.error(f"{path}.strategy", f"unknown MIG strategy {part.strategy!r} (mixed, single)")
        part.dynamic = doc.get("dynamic", True)
        if not isinstance(part.dynamic, bool):
            raise where.error(f"{path}.dynamic", f"must be true or false, got {part.dynamic!r}")
        if part.strategy == "single":
            try:
                part.profile = part.model.profile(str(doc.get("profile", ""))).name
            except ValueError as exc:
                raise where.error(f"{path}.profile", str(exc)) from None
        instances = doc.get("instances") or {}
        if not isinstance(instances, Mapping):
            raise where.error(f"{path}.instances", "must map a device ID to its list of instances")
        for dev, items in instances.items():
            if not isinstance(items, list) and items is not None:
                raise where.error(f"{path}.instances.{dev}", "must be a list of instances, e.g. [3g.20gb@0]")
            if dev not in part.devices:
                raise where.error(f"{path}.instances", f"unknown device {dev!r} (devices: {', '.join(part.devices)})")
            d = part.devices.index(dev)
            try:
                insts = [mig.parse_instance(part.model, str(t)) for t in items or []]
                mig.check_layout(part.model, insts)
            except ValueError as exc:
                raise where.error(f"{path}.instances.{dev}", str(exc)) from None
            if part.strategy == "single" and any(i.profile != part.profile for i in insts):
                raise where.error(f"{path}.instances.{dev}", f"the single strategy allows only {part.profile}")
            part.instances[d] = [(i, "") for i in insts]
    elif mode == "slices":
        part.resource = str(doc.get("resource", ""))
        if "/" not in part.resource:
            raise where.error(f"{path}.resource", "must name the slice resource, e.g. example.com/accel-slice")
        units = doc.get("units")
        if not isinstance(units, int) or isinstance(units, bool) or not 1 <= units <= 64:
            raise where.error(f"{path}.units", f"must be a whole number of slices per device in 1..64, got {units!r}")
        part.units = units
    elif mode == "timeslicing":
        part.resource = str(doc.get("resource", GPU_RESOURCE))
        replicas = doc.get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or not 1 <= replicas <= 64:
            raise where.error(f"{path}.replicas", f"must be a whole number of replicas in 1..64, got {replicas!r}")
        part.replicas = replicas
    part.fixed = [[i for i, _ in dev] for dev in part.instances]
    return part
