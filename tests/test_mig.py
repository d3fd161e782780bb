"""MIG profile tables and placement rules, checked exhaustively against an independent copy of the reference table."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsched.devices import mig
from accelsched.devices.mig import Instance

# The reference table (shared/reference/devices-and-topology.md, "MIG profiles"), written out again here so the
# module is checked against the document rather than against itself: (name, compute, size, starts, max_count).
_A100_40 = [
    ("1g.5gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    ("1g.10gb", 1, 2, (0, 2, 4, 6), 4),
    ("2g.10gb", 2, 2, (0, 2, 4), 3),
    ("3g.20gb", 3, 4, (0, 4), 2),
    ("4g.20gb", 4, 4, (0,), 1),
    ("7g.40gb", 7, 8, (0,), 1),
]
_80 = [
    ("1g.10gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    ("1g.20gb", 1, 2, (0, 2, 4, 6), 4),
    ("2g.20gb", 2, 2, (0, 2, 4), 3),
    ("3g.40gb", 3, 4, (0, 4), 2),
    ("4g.40gb", 4, 4, (0,), 1),
    ("7g.80gb", 7, 8, (0,), 1),
]
TABLE = {"A100-40GB": _A100_40, "A100-80GB": _80, "H100-80GB": _80}
ROW = {m: {r[0]: r for r in rows} for m, rows in TABLE.items()}
A40 = mig.model("A100-40GB")


def inst(model_name: str, profile: str, start: int) -> Instance:
    return Instance(profile, start, ROW[model_name][profile][2])


def valid(model_name: str, layout: list[tuple[str, int]]) -> bool:
    """The placement rules, computed from the table above with plain sets (independent of the module)."""
    used: set[int] = set()
    counts: dict[str, int] = {}
    compute = 0
    for name, start in layout:
        _, c, size, starts, _ = ROW[model_name][name]
        if start not in starts:
            return False
        run = set(range(start, start + size))
        if run & used:
            return False
        used |= run
        counts[name] = counts.get(name, 0) + 1
        compute += c
    return compute <= 7 and all(n <= ROW[model_name][p][4] for p, n in counts.items())


def accepts(model: mig.Model, instances: list[Instance]) -> bool:
    try:
        mig.check_layout(model, instances)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------------------------- tables


@pytest.mark.parametrize("name", list(TABLE))
def test_tables_match_reference(name: str) -> None:
    model = mig.MODELS[name]
    assert model.name == name
    assert list(model.profiles) == [r[0] for r in TABLE[name]]  # user-guide order, smallest first
    for pname, compute, size, starts, max_count in TABLE[name]:
        assert model.profile(pname) == mig.Profile(pname, compute, size, starts, max_count)


@pytest.mark.parametrize("name", list(TABLE))
def test_parse_instance_accepts_exactly_the_allowed_starts(name: str) -> None:
    model = mig.MODELS[name]
    for pname, _, size, starts, _ in TABLE[name]:
        for start in range(-1, mig.SLICES + 1):
            if start in starts:
                got = mig.parse_instance(model, f"{pname}@{start}")
                assert got == Instance(pname, start, size)
                assert str(got) == f"{pname}@{start}"
            else:
                with pytest.raises(ValueError) as exc:
                    mig.parse_instance(model, f"{pname}@{start}")
                if start >= 0:
                    assert f"allowed starts: {', '.join(map(str, starts))}" in str(exc.value)


def test_parse_instance_errors() -> None:
    for bad in ("3g.20gb", "3g.20gb@", "@4", "3g.20gb@x", "3g.20gb@4@0", ""):
        with pytest.raises(ValueError, match="expected PROFILE@START"):
            mig.parse_instance(A40, bad)
    with pytest.raises(ValueError) as exc:
        mig.parse_instance(A40, "2g.20gb@0")
    assert str(exc.value) == (
        "profile 2g.20gb is not valid on A100-40GB (valid: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)"
    )
    with pytest.raises(ValueError, match=r"3g\.20gb cannot start at slice 2 on A100-40GB \(allowed starts: 0, 4\)"):
        mig.parse_instance(A40, "3g.20gb@2")
    assert mig.parse_instance(A40, " 3G.20GB @ 4 ") == Instance("3g.20gb", 4, 4)


def test_profile_sizes_differ_per_model() -> None:
    # 1g.10gb is a two-slice profile on A100-40GB but the one-slice profile on 80GB parts.
    assert A40.profile("1g.10gb").size == 2
    assert mig.model("A100-80GB").profile("1g.10gb").size == 1


# ------------------------------------------------------------------------------------------ check_layout


@pytest.mark.parametrize("name", list(TABLE))
def test_every_pair_is_accepted_iff_valid(name: str) -> None:
    model = mig.MODELS[name]
    singles = [(r[0], s) for r in TABLE[name] for s in range(mig.SLICES)]
    for (p1, s1), (p2, s2) in itertools.product(singles, repeat=2):
        r1, r2 = ROW[name][p1], ROW[name][p2]
        disjoint = not set(range(s1, s1 + r1[2])) & set(range(s2, s2 + r2[2]))
        expected = (
            s1 in r1[3]
            and s2 in r2[3]
            and disjoint
            and (p1 != p2 or r1[4] >= 2)
            and r1[1] + r2[1] <= mig.COMPUTE_SLICES
        )
        assert accepts(model, [inst(name, p1, s1), inst(name, p2, s2)]) == expected, (p1, s1, p2, s2)


def test_reference_example_layout_is_valid() -> None:
    layout = [mig.parse_instance(A40, t) for t in ("3g.20gb@4", "2g.10gb@2", "1g.5gb@0", "1g.5gb@1")]
    mig.check_layout(A40, layout)
    assert mig.free_slices(layout) == []
    assert mig.occupied(layout) == 0xFF


def test_seven_g_excludes_everything() -> None:
    seven = [inst("A100-40GB", "7g.40gb", 0)]
    mig.check_layout(A40, seven)
    for name in A40.profiles:
        assert mig.placements(A40, seven, name) == []
        assert mig.choose(A40, seven, name) is None
    assert (
        mig.why_not(A40, seven, "7g.40gb") == "no free 7g.40gb placement: 1 of 1 7g.40gb instances already on this GPU"
    )
    assert mig.why_not(A40, seven, "1g.5gb") == "no free 1g.5gb placement: compute slices exhausted (7 of 7 used)"
    assert mig.fragmentation(A40, seven) == 0


def test_check_layout_messages() -> None:
    with pytest.raises(ValueError, match=r"^3g\.20gb@4 and 1g\.5gb@5 overlap on slice 5$"):
        mig.check_layout(A40, [inst("A100-40GB", "3g.20gb", 4), inst("A100-40GB", "1g.5gb", 5)])
    with pytest.raises(ValueError, match=r"^4g\.20gb@0 and 2g\.10gb@2 overlap on slices 2-3$"):
        mig.check_layout(A40, [inst("A100-40GB", "4g.20gb", 0), inst("A100-40GB", "2g.10gb", 2)])
    with pytest.raises(ValueError, match=r"1g\.5gb cannot start at slice 7 .*allowed starts: 0, 1, 2, 3, 4, 5, 6"):
        mig.check_layout(A40, [Instance("1g.5gb", 7, 1)])
    with pytest.raises(ValueError, match=r"size 1 does not match 3g\.20gb"):
        mig.check_layout(A40, [Instance("3g.20gb", 0, 1)])
    with pytest.raises(ValueError, match="not valid on A100-40GB"):
        mig.check_layout(A40, [Instance("3g.40gb", 0, 4)])


def test_count_and_compute_limits_with_a_synthetic_model() -> None:
    # The real tables never reach these limits without overlapping, so a made-up model exercises them.
    model = mig.Model(
        "TEST",
        {
            "1g.x": mig.Profile("1g.x", 1, 1, (0, 1, 2, 3), 2),
            "4g.x": mig.Profile("4g.x", 4, 2, (4, 6), 2),
        },
    )
    two = [Instance("1g.x", 0, 1), Instance("1g.x", 1, 1)]
    with pytest.raises(ValueError, match=r"3 1g\.x instances, but at most 2 fit"):
        mig.check_layout(model, [*two, Instance("1g.x", 2, 1)])
    assert mig.placements(model, two, "1g.x") == []
    assert "2 of 2 1g.x instances already on this GPU" in mig.why_not(model, two, "1g.x")
    big = [Instance("4g.x", 4, 2)]
    with pytest.raises(ValueError, match="instances use 8 compute slices, but a GPU has 7"):
        mig.check_layout(model, [*big, Instance("4g.x", 6, 2)])
    assert mig.placements(model, big, "4g.x") == []
    assert "4g.x needs 4 compute slices but only 3 of 7 are free" in mig.why_not(model, big, "4g.x")
    with pytest.raises(ValueError, match="runs off the GPU"):
        mig.Model("BAD", {"3g": mig.Profile("3g", 3, 4, (6,), 1)})


# ------------------------------------------------------------------------------------------- placements


def _reachable_a100_40() -> list[frozenset[tuple[str, int]]]:
    """Every layout reachable from an empty A100-40GB by adding valid instances (by the test's own rules)."""
    empty: frozenset[tuple[str, int]] = frozenset()
    seen = {empty}
    frontier = [empty]
    while frontier:
        nxt = []
        for layout in frontier:
            for pname, start in itertools.product(ROW["A100-40GB"], range(mig.SLICES)):
                grown = layout | {(pname, start)}
                if grown not in seen and valid("A100-40GB", sorted(grown)):
                    seen.add(grown)
                    nxt.append(grown)
        frontier = nxt
    return sorted(seen, key=lambda lay: (len(lay), sorted(lay)))


def test_placements_on_every_reachable_layout() -> None:
    layouts = _reachable_a100_40()
    assert len(layouts) > 500  # sanity: the search really explored the space
    for layout in layouts:
        pairs = sorted(layout)
        instances = [inst("A100-40GB", p, s) for p, s in pairs]
        for pname in ROW["A100-40GB"]:
            got = mig.placements(A40, instances, pname)
            want = [s for s in range(mig.SLICES) if valid("A100-40GB", [*pairs, (pname, s)])]
            assert got == want, (pairs, pname)
            for s in got:  # each returned start really keeps the layout valid
                mig.check_layout(A40, [*instances, inst("A100-40GB", pname, s)])
            if not got:
                assert mig.why_not(A40, instances, pname).startswith(f"no free {pname} placement: ")
                assert mig.choose(A40, instances, pname) is None


def test_wrong_free_slices_explained() -> None:
    # Five slices free (0-1, 4-5, 7) yet no 3g.20gb: neither start 0 nor start 4 has four free slices.
    layout = [mig.parse_instance(A40, "2g.10gb@2"), mig.parse_instance(A40, "1g.5gb@6")]
    assert mig.free_slices(layout) == [0, 1, 4, 5, 7]
    assert mig.occupied(layout) == 0b0100_1100
    assert mig.placements(A40, layout, "3g.20gb") == []
    reason = mig.why_not(A40, layout, "3g.20gb")
    assert reason == (
        "no free 3g.20gb placement: slices 0-1,4-5,7 free but 3g.20gb needs 4 aligned slices starting at 0 or 4"
    )
    assert mig.placements(A40, layout, "1g.5gb") == [0, 1, 4, 5]
    assert mig.why_not(A40, layout, "1g.5gb") == "1g.5gb can be placed at slice 0, 1, 4 or 5"


def test_why_not_other_reasons() -> None:
    threes = [inst("A100-40GB", "3g.20gb", 0), inst("A100-40GB", "3g.20gb", 4)]
    assert (
        mig.why_not(A40, threes, "3g.20gb") == "no free 3g.20gb placement: 2 of 2 3g.20gb instances already on this GPU"
    )
    assert mig.why_not(A40, threes, "1g.5gb") == "no free 1g.5gb placement: all 8 slices are in use"
    ones = [inst("A100-40GB", "1g.5gb", s) for s in range(7)]
    assert mig.why_not(A40, ones, "1g.10gb") == "no free 1g.10gb placement: compute slices exhausted (7 of 7 used)"


def test_choose_policies() -> None:
    empty: list[Instance] = []
    assert mig.choose(A40, empty, "1g.5gb", "first") == 0
    # pack keeps the large profiles possible: a 1g goes high so 4g/3g at 0 stay placeable ...
    assert mig.choose(A40, empty, "1g.5gb") == 6
    assert mig.choose(A40, empty, "1g.10gb") == 6
    assert mig.choose(A40, empty, "2g.10gb") == 4
    # ... and a 3g takes 4, leaving 4g.20gb@0 possible (NVIDIA's example layout starts the same way).
    assert mig.choose(A40, empty, "3g.20gb") == 4
    assert mig.choose(A40, empty, "7g.40gb") == 0
    # Only ties left: the lowest start.
    assert mig.choose(A40, [inst("A100-40GB", "3g.20gb", 4)], "1g.5gb") == 0
    with pytest.raises(ValueError, match="unknown MIG placement policy 'best'"):
        mig.choose(A40, empty, "1g.5gb", "best")


# ----------------------------------------------------------------------------------------- fragmentation


def test_fragmentation_small_cases() -> None:
    def lay(*texts: str) -> list[Instance]:
        return [mig.parse_instance(A40, t) for t in texts]

    assert mig.fragmentation(A40, []) == 0
    wrong = lay("2g.10gb@2", "1g.5gb@6")  # free 0,1,4,5,7; slice 7 is reachable only by 1g.10gb@6, 3g@4 or 7g
    assert mig.fragmentation(A40, wrong) == 1
    assert mig.fragmentation(A40, wrong, ["3g.20gb"]) == 5
    assert mig.fragmentation(A40, wrong, ["1g.10gb", "2g.10gb"]) == 1
    tail = lay("3g.20gb@0", "2g.10gb@4")  # free 6,7: 1g.10gb@6 uses both, 1g.5gb@6 only slice 6
    assert mig.fragmentation(A40, tail) == 0
    assert mig.fragmentation(A40, tail, ["1g.5gb"]) == 1
    assert mig.fragmentation(A40, tail, ["2g.10gb"]) == 2
    ones = lay(*(f"1g.5gb@{s}" for s in range(7)))  # slice 7 free, compute exhausted
    assert mig.fragmentation(A40, ones) == 1
    with pytest.raises(ValueError, match="not valid on A100-40GB"):
        mig.fragmentation(A40, [], ["3g.40gb"])


def test_instance_helpers() -> None:
    i = Instance("3g.20gb", 4, 4)
    assert str(i) == "3g.20gb@4"
    assert i.slices == range(4, 8)
    assert mig.occupied([]) == 0
    assert mig.free_slices([]) == list(range(8))


# ------------------------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(list(TABLE)),
    steps=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["pack", "first"])), max_size=20),
)
def test_choose_never_breaks_the_rules(name: str, steps: list[tuple[int, str]]) -> None:
    model = mig.MODELS[name]
    names = list(ROW[name])
    layout: list[Instance] = []
    for index, policy in steps:
        pname = names[index]
        start = mig.choose(model, layout, pname, policy)
        options = mig.placements(model, layout, pname)
        if start is None:
            assert options == []
            continue
        assert start in options
        if policy == "first":
            assert start == options[0]
        layout.append(inst(name, pname, start))
        pairs = [(i.profile, i.start) for i in layout]
        assert valid(name, pairs)
        mig.check_layout(model, layout)
        assert sum(len(i.slices) for i in layout) <= mig.SLICES
        assert bin(mig.occupied(layout)).count("1") == sum(len(i.slices) for i in layout)  # no overlap
        assert sum(ROW[name][p][1] for p, _ in pairs) <= mig.COMPUTE_SLICES
        for p in set(names):
            assert sum(q == p for q, _ in pairs) <= ROW[name][p][4]
        assert mig.free_slices(layout) == [s for s in range(8) if not any(s in i.slices for i in layout)]


# ---------------------------------------------------------------------------------------------- models


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("A100-40GB", "A100-40GB"),
        ("a100-80gb", "A100-80GB"),
        ("A100-SXM4-40GB", "A100-40GB"),
        ("A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("H100-SXM5-80GB", "H100-80GB"),
        ("H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("NVIDIA H100 PCIe", "H100-80GB"),
        ("h100", "H100-80GB"),
    ],
)
def test_model_aliases(alias: str, canonical: str) -> None:
    assert mig.model(alias) is mig.MODELS[canonical]


@pytest.mark.parametrize(
    "bad", ["", "V100-32GB", "H100 NVL", "H100-94GB", "A100-40GB-80GB", "GH200", "A100 MIG 1g.5gb"]
)
def test_unknown_models(bad: str) -> None:
    with pytest.raises(ValueError, match=r"unknown MIG GPU model .*valid: A100-40GB, A100-80GB, H100-80GB"):
        mig.model(bad)


def test_ambiguous_model() -> None:
    with pytest.raises(ValueError, match=r"A100' is ambiguous: give the memory size \(A100-40GB or A100-80GB\)"):
        mig.model("NVIDIA A100")


def test_models_hash_by_name() -> None:
    assert len({mig.model("A100-80GB"), mig.model("H100-80GB"), mig.model("A100 80GB PCIe")}) == 2
