"""NVIDIA MIG (Multi-Instance GPU) profiles and the rules for placing instances on one GPU.

A MIG-capable GPU is cut into 8 memory slices and 7 compute slices. A GPU instance of a profile such as
``3g.20gb`` takes ``3`` compute slices and a *run* of memory slices, and the hardware only lets that run start
at a few aligned slots (``nvidia-smi mig -lgipp``). Two GPUs with the same number of free slices can therefore
differ completely in what still fits: with ``2g.10gb@2`` and ``1g.5gb@6`` in place, five slices are free but no
``3g.20gb`` can be created, because neither start 0 nor start 4 has four free slices after it. Counting
capacity (what the default scheduler does with ``nvidia.com/mig-*`` resources) misses this; this module models
the placement itself so the scheduler can predict, choose and explain.

Tables follow the NVIDIA MIG user guide for A100-40GB, A100-80GB and H100-80GB (the ``+me`` media-extension
profiles and other GPUs are not modelled). Everything here is pure and small: a layout is a sequence of
:class:`Instance`, validated against a :class:`Model`. Errors are ``ValueError`` with a one-line message that a
caller can wrap in :class:`accelsched.errors.InputError` with the file and field.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from accelsched.ranges import compact as compact_ranges

SLICES = 8  # memory slices per GPU; a profile occupies a run of them
COMPUTE_SLICES = 7  # compute slices per GPU; the sum over instances may not exceed this

_POLICIES = ("pack", "first")


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile of one GPU model, with where the hardware allows it to start."""

    name: str  # "3g.20gb"
    compute: int  # the g count: 1, 2, 3, 4, 7
    size: int  # memory slices taken: 1, 2, 4 or 8
    starts: tuple[int, ...]  # allowed start slots (memory slice index of the first slice)
    max_count: int  # instances of this profile per GPU


@dataclass(frozen=True)
class Model:
    """A MIG-capable GPU model: its profiles by name, smallest first as in the MIG user guide.

    The profile table is shared; treat it as read-only. Hashing uses the name only.
    """

    name: str  # canonical: "A100-40GB", "A100-80GB", "H100-80GB"
    profiles: dict[str, Profile] = field(hash=False)

    def __post_init__(self) -> None:
        # A wrong table entry would make every placement below silently wrong, so the tables check themselves.
        for key, p in self.profiles.items():
            if key != p.name:
                raise ValueError(f"{self.name}: profile key {key!r} does not match its name {p.name!r}")
            if not 1 <= p.compute <= COMPUTE_SLICES or p.max_count < 1 or not p.starts:
                raise ValueError(f"{self.name}: profile {p.name} has an impossible compute, count or start list")
            if any(s < 0 or s + p.size > SLICES for s in p.starts):
                raise ValueError(f"{self.name}: profile {p.name} has a start slot that runs off the GPU")

    def profile(self, name: str) -> Profile:
        """The profile called ``name`` (case-insensitive); ValueError listing the valid ones otherwise.

        Profile names are per model: ``1g.10gb`` is a one-slice profile on 80GB parts and a two-slice profile on
        A100-40GB, so a name is only meaningful together with the model.
        """
        p = self.profiles.get(name.strip().lower())
        if p is None:
            raise ValueError(f"profile {name} is not valid on {self.name} (valid: {', '.join(self.profiles)})")
        return p


def _table(model_name: str, rows: Sequence[tuple[str, int, int, Sequence[int], int]]) -> Model:
    return Model(model_name, {n: Profile(n, c, size, tuple(starts), cnt) for n, c, size, starts, cnt in rows})


# (name, compute slices, memory slices, start slots, max instances per GPU)
_A100_40GB = [
    ("1g.5gb", 1, 1, range(7), 7),
    ("1g.10gb", 1, 2, (0, 2, 4, 6), 4),
    ("2g.10gb", 2, 2, (0, 2, 4), 3),
    ("3g.20gb", 3, 4, (0, 4), 2),
    ("4g.20gb", 4, 4, (0,), 1),
    ("7g.40gb", 7, 8, (0,), 1),
]
_80GB = [  # A100-80GB and H100-80GB share the geometry and the profile names
    ("1g.10gb", 1, 1, range(7), 7),
    ("1g.20gb", 1, 2, (0, 2, 4, 6), 4),
    ("2g.20gb", 2, 2, (0, 2, 4), 3),
    ("3g.40gb", 3, 4, (0, 4), 2),
    ("4g.40gb", 4, 4, (0,), 1),
    ("7g.80gb", 7, 8, (0,), 1),
]

MODELS: dict[str, Model] = {
    "A100-40GB": _table("A100-40GB", _A100_40GB),
    "A100-80GB": _table("A100-80GB", _80GB),
    "H100-80GB": _table("H100-80GB", _80GB),
}

# Tokens that may appear in a product name (nvidia-smi, GPU feature discovery labels, datasheets) without
# changing which MIG table applies: vendor, brand, form factor and memory technology.
_IGNORED_TOKENS = frozenset({"NVIDIA", "TESLA", "SXM", "SXM4", "SXM5", "PCIE", "HBM2", "HBM2E", "HBM3"})
_FAMILY_MEMORY = {"A100": ("40GB", "80GB"), "H100": ("80GB",)}


def model(name: str) -> Model:
    """The model for a canonical name or a product name such as ``NVIDIA A100-SXM4-80GB`` or ``H100 80GB HBM3``.

    Product names come from several places (``nvidia-smi``, the ``nvidia.com/gpu.product`` label, people), so the
    name is split into tokens: vendor, form factor and memory-technology words are ignored, and what remains
    must be exactly a family (A100, H100) and optionally a memory size. The memory size is required for A100,
    which exists as 40GB and 80GB; ``H100`` alone (e.g. ``NVIDIA H100 PCIe``) means the 80GB part. Any other
    word (``NVL``, ``MIG`` ...) is rejected rather than guessed at, because a wrong table gives wrong placements.
    """
    text = name.strip()
    if text in MODELS:
        return MODELS[text]
    valid = ", ".join(MODELS)
    unknown = ValueError(
        f"unknown MIG GPU model {name!r} (valid: {valid}; product names such as "
        f"'NVIDIA A100-SXM4-40GB' or 'H100 80GB HBM3' are accepted)"
    )
    family = memory = None
    for tok in re.split(r"[^A-Z0-9]+", text.upper()):
        if not tok or tok in _IGNORED_TOKENS:
            continue
        m = re.fullmatch(r"(\d+)GB?", tok)
        if tok in _FAMILY_MEMORY and family is None:
            family = tok
        elif m and memory is None:
            memory = f"{int(m.group(1))}GB"
        else:
            raise unknown
    if family is None:
        raise unknown
    if memory is None:
        sizes = _FAMILY_MEMORY[family]
        if len(sizes) > 1:
            options = " or ".join(f"{family}-{s}" for s in sizes)
            raise ValueError(f"MIG GPU model {name!r} is ambiguous: give the memory size ({options})")
        memory = sizes[0]
    found = MODELS.get(f"{family}-{memory}")
    if found is None:
        raise unknown
    return found


@dataclass(frozen=True)
class Instance:
    """One GPU instance on a GPU: its profile name, first memory slice and number of memory slices."""

    profile: str
    start: int
    size: int

    @property
    def slices(self) -> range:
        """The memory slices it occupies: ``start .. start+size-1``."""
        return range(self.start, self.start + self.size)

    def __str__(self) -> str:
        return f"{self.profile}@{self.start}"


def _either(values: Sequence[int]) -> str:
    """``0``, ``0 or 4``, ``0, 2 or 4``: readable lists of start slots."""
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def _bad_start(model: Model, p: Profile, start: int) -> str:
    return f"{p.name} cannot start at slice {start} on {model.name} (allowed starts: {', '.join(map(str, p.starts))})"


def parse_instance(model: Model, text: str) -> Instance:
    """Parse ``PROFILE@START`` (e.g. ``3g.20gb@4``), the form operators write and allocations report.

    The start is part of the instance's identity because it decides what can still be placed beside it.
    ValueError for bad syntax, a profile the model does not have, or a start the profile may not use.
    """
    m = re.fullmatch(r"\s*([^@\s]+)\s*@\s*(\d+)\s*", text)
    if m is None:
        raise ValueError(f"bad MIG instance {text!r}: expected PROFILE@START, e.g. 3g.20gb@4")
    p = model.profile(m.group(1))
    start = int(m.group(2))
    if start not in p.starts:
        raise ValueError(_bad_start(model, p, start))
    return Instance(p.name, start, p.size)


def _resolve(model: Model, instances: Sequence[Instance]) -> list[Profile]:
    """The profile of each instance, checking its start slot and size against the model's table."""
    out = []
    for inst in instances:
        p = model.profile(inst.profile)
        if inst.size != p.size:
            raise ValueError(f"{inst}: size {inst.size} does not match {p.name}, which takes {p.size} slices")
        if inst.start not in p.starts:
            raise ValueError(f"{inst}: {_bad_start(model, p, inst.start)}")
        out.append(p)
    return out


def check_layout(model: Model, instances: Sequence[Instance]) -> None:
    """Raise ValueError unless ``instances`` can coexist on one GPU of ``model``.

    The rules: every instance uses an allowed start and its profile's size; no two share a memory slice; no
    profile appears more than its ``max_count``; compute slices add up to at most 7. The first broken rule is
    reported, naming the instances involved.
    """
    profiles = _resolve(model, instances)
    for i, a in enumerate(instances):
        for b in instances[i + 1 :]:
            shared = [s for s in a.slices if s in b.slices]
            if shared:
                what = f"slice {shared[0]}" if len(shared) == 1 else f"slices {compact_ranges(shared)}"
                raise ValueError(f"{a} and {b} overlap on {what}")
    for name, n in Counter(p.name for p in profiles).items():
        if n > model.profiles[name].max_count:
            raise ValueError(
                f"{n} {name} instances, but at most {model.profiles[name].max_count} fit on one {model.name}"
            )
    compute = sum(p.compute for p in profiles)
    if compute > COMPUTE_SLICES:
        raise ValueError(f"instances use {compute} compute slices, but a GPU has {COMPUTE_SLICES}")


def occupied(instances: Sequence[Instance]) -> int:
    """Bitmask of the memory slices in use (bit ``i`` = slice ``i``)."""
    mask = 0
    for inst in instances:
        mask |= _mask(inst.start, inst.size)
    return mask


def free_slices(instances: Sequence[Instance]) -> list[int]:
    """The memory slices no instance occupies, ascending."""
    mask = occupied(instances)
    return [s for s in range(SLICES) if not mask >> s & 1]


def _budget(profiles: Sequence[Profile], p: Profile) -> tuple[int, int]:
    """(instances of ``p`` already present, compute slices already used)."""
    return sum(q.name == p.name for q in profiles), sum(q.compute for q in profiles)


def _placements(current: Sequence[Profile], mask: int, p: Profile) -> list[int]:
    count, compute = _budget(current, p)
    if count >= p.max_count or compute + p.compute > COMPUTE_SLICES:
        return []
    return [s for s in p.starts if not mask & _mask(s, p.size)]


def placements(model: Model, instances: Sequence[Instance], profile: str) -> list[int]:
    """Every start slot where a new instance of ``profile`` can be created now, ascending.

    A slot qualifies when it is an allowed start, the run of slices from it is free, the profile is below its
    ``max_count`` and the compute budget has room. The existing layout is validated first (ValueError).
    """
    check_layout(model, instances)
    current = _resolve(model, instances)
    return _placements(current, occupied(instances), model.profile(profile))


def _room(model: Model, current: Sequence[Profile], mask: int) -> tuple[int, ...]:
    """How much room a layout leaves: placement counts per profile, largest profile first (compared as a tuple)."""
    order = sorted(model.profiles.values(), key=lambda q: (q.size, q.compute), reverse=True)
    return tuple(len(_placements(current, mask, q)) for q in order)


def choose(model: Model, instances: Sequence[Instance], profile: str, policy: str = "pack") -> int | None:
    """The start slot for a new ``profile`` instance, or None when it cannot be placed.

    ``first``: the lowest valid start (what a naive ``nvidia-smi mig -cgi`` loop does).

    ``pack``: the start that leaves the most room afterwards. Room is compared lexicographically, largest
    profile first, by the number of placements each profile would still have; ties go to the lowest start.
    Protecting the large profiles first is what avoids fragmentation: on an empty A100-40GB a ``1g.5gb`` goes to
    slice 6 (``4g``/``3g`` at 0 stay possible) and a ``3g.20gb`` goes to 4 (``4g.20gb@0`` stays possible),
    which is NVIDIA's own advice of filling from the high end.
    """
    if policy not in _POLICIES:
        raise ValueError(f"unknown MIG placement policy {policy!r} (valid: {', '.join(_POLICIES)})")
    starts = placements(model, instances, profile)
    if not starts:
        return None
    if policy == "first":
        return starts[0]
    p = model.profile(profile)
    current = _resolve(model, instances)
    mask = occupied(instances)
    # max() keeps the first of equal keys, and starts are ascending, so ties go to the lowest start.
    return max(starts, key=lambda s: _room(model, [*current, p], mask | _mask(s, p.size)))


def why_not(model: Model, instances: Sequence[Instance], profile: str) -> str:
    """Why no new ``profile`` instance fits, in one line; the most fundamental reason wins.

    Order: the profile's ``max_count`` is reached, then the compute budget, then geometry (free slices exist but
    none forms an aligned run). When the profile does fit, the answer says where.
    """
    check_layout(model, instances)
    p = model.profile(profile)
    current = _resolve(model, instances)
    starts = _placements(current, occupied(instances), p)
    if starts:
        return f"{p.name} can be placed at slice {_either(starts)}"
    head = f"no free {p.name} placement"
    count, compute = _budget(current, p)
    if count >= p.max_count:
        return f"{head}: {count} of {p.max_count} {p.name} instances already on this GPU"
    if compute + p.compute > COMPUTE_SLICES:
        if compute >= COMPUTE_SLICES:
            return f"{head}: compute slices exhausted ({compute} of {COMPUTE_SLICES} used)"
        return (
            f"{head}: {p.name} needs {p.compute} compute slices but only {COMPUTE_SLICES - compute} "
            f"of {COMPUTE_SLICES} are free"
        )
    free = free_slices(instances)
    if not free:
        return f"{head}: all {SLICES} slices are in use"
    need = "1 slice" if p.size == 1 else f"{p.size} aligned slices"
    return f"{head}: slices {compact_ranges(free)} free but {p.name} needs {need} starting at {_either(p.starts)}"


def fragmentation(model: Model, instances: Sequence[Instance], profiles: Sequence[str] | None = None) -> int:
    """Free slices that no new instance of ``profiles`` (default: all of the model's) could use right now.

    That is the number of free slices minus the union of the slices covered by every currently valid placement
    of those profiles. A fragmented GPU looks like spare capacity to anyone counting slices; this measures the
    part that is stranded, so packing policies and reports can minimise it.
    """
    check_layout(model, instances)
    names = list(model.profiles) if profiles is None else list(profiles)
    current = _resolve(model, instances)
    mask = occupied(instances)
    coverable = 0
    for name in names:
        p = model.profile(name)
        for s in _placements(current, mask, p):
            coverable |= _mask(s, p.size)
    return sum(1 for s in free_slices(instances) if not coverable >> s & 1)
