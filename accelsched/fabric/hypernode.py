"""Volcano's HyperNode tree (``topology.volcano.sh/v1alpha1``) as topology levels, and what a Volcano PodGroup
asks of it (``spec.networkTopology``).

A HyperNode groups nodes (members of type Node, by ``exactMatch`` name, ``regexMatch`` pattern or
``labelMatch`` selector) or lower-tier HyperNodes (type HyperNode, by name or pattern); tier 1 is the nearest
(one switch), higher tiers are wider. Here every tier becomes a level, the node label ``TIER_PREFIX<tier>``
whose value is the name of the node's HyperNode at that tier, and one Kueue-style ``Topology`` (``TOPOLOGY``)
lists those labels widest first, so the fabric layer (placement, preemption, explain) works on them as on any
Topology. A node in no HyperNode of a tier keeps, at that tier, the nearest HyperNode below it that holds it
(it stands alone there, as a subtree without a parent does in Volcano); a node in no HyperNode at all carries
no tier label and stays outside the tree, as Kueue leaves unlabelled nodes out.

Checked as the CRD (OpenAPI and CEL rules, with its words) and Volcano's admission webhook check it, then as a
tree: a HyperNode member of a lower tier, named once at each tier, a named HyperNode that exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelsched.api import validation as rules
from accelsched.api.objects import Node, metadata, parse_label_selector
from accelsched.api.selectors import LabelSelector
from accelsched.errors import Where
from accelsched.fabric import levels

GROUP = "topology.volcano.sh"
KIND = "HyperNode"
API_VERSION = f"{GROUP}/v1alpha1"
PODGROUP_GROUP = "scheduling.volcano.sh"
TIER_PREFIX = "accelsched.io/hypernode-tier-"  # + the tier: the node label each tier becomes
TOPOLOGY = "hypernodes"  # the Topology the tree becomes
MEMBER_TYPES = ("Node", "HyperNode")
MAX_NAME = 253
# +kubebuilder:validation:Pattern of ExactMatch.name, verbatim.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_NAME_RE = re.compile(NAME_PATTERN)
# The MemberSelector's CEL rules (x-kubernetes-validations), their messages verbatim.
NO_SELECTOR = "Either ExactMatch or RegexMatch or LabelMatch must be specified"
TWO_SELECTORS = "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
MODES = ("hard", "soft")


def tier_key(tier: int) -> str:
    return f"{TIER_PREFIX}{tier}"


@dataclass(frozen=True)
class Member:
    type: str  # Node or HyperNode
    exact: str = ""
    pattern: re.Pattern | None = None
    labels: LabelSelector | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.exact:
            return name == self.exact
        if self.pattern is not None:
            return self.pattern.search(name) is not None  # Go's regexp.MatchString: unanchored
        return self.labels is not None and self.labels.matches(labels)


@dataclass(frozen=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str = ""
    members: tuple[Member, ...] = ()
    source: str = ""


def is_hypernode(doc: Mapping[str, Any]) -> bool:
    """Volcano's HyperNode; one without an apiVersion too, so that it is refused rather than read past unseen."""
    api_version = doc.get("apiVersion")
    if doc.get("kind") != KIND:
        return False
    return not api_version or (isinstance(api_version, str) and api_version.split("/", 1)[0] == GROUP)


def _invalid(value: Any, message: str) -> str:
    return (
        f"Invalid value: {value!r}: {message}" if not isinstance(value, str) else f'Invalid value: "{value}": {message}'
    )


def parse_hypernode(doc: Mapping[str, Any], source: str = "") -> HyperNode:
    """A HyperNode, refused (the first problem) as the API server and Volcano's webhook would refuse it."""
    where, name, _, _ = metadata(doc, source, KIND, namespaced=False)
    if not doc.get("apiVersion"):
        raise where.error("apiVersion", f"is required (served for {KIND}: {API_VERSION})")
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise where.error("spec", "Required value")
    tier = spec.get("tier")
    if tier is None:
        raise where.error("spec.tier", "Required value")
    if not isinstance(tier, int) or isinstance(tier, bool):
        raise where.error("spec.tier", _invalid(tier, "spec.tier must be of type integer"))
    if tier < 0:
        raise where.error("spec.tier", f"Invalid value: {tier}: spec.tier in body should be greater than or equal to 0")
    tier_name = spec.get("tierName", "")
    if not isinstance(tier_name, str):
        raise where.error("spec.tierName", _invalid(tier_name, "spec.tierName must be of type string"))
    if len(tier_name) > MAX_NAME:
        raise where.error("spec.tierName", f"Too long: may not be more than {MAX_NAME} bytes")
    members = spec.get("members")
    if members is None:
        members = []
    if not isinstance(members, list):
        raise where.error("spec.members", _invalid(type(members).__name__, "spec.members must be of type array"))
    if not members:
        # Volcano's webhook: a HyperNode groups something (the CRD's MinItems=1 as well).
        raise where.error("spec.members", "Invalid value: 0: spec.members in body should have at least 1 items")
    return HyperNode(
        name, tier, tier_name, tuple(_member(where, m, f"spec.members[{i}]") for i, m in enumerate(members)), source
    )


def _member(where: Where, member: Any, path: str) -> Member:
    if not isinstance(member, Mapping):
        raise where.error(path, _invalid(type(member).__name__, f"{path} must be of type object"))
    kind = member.get("type")
    if kind is None:
        raise where.error(f"{path}.type", "Required value")
    if kind not in MEMBER_TYPES:
        supported = ", ".join(f'"{t}"' for t in MEMBER_TYPES)
        raise where.error(f"{path}.type", f'Unsupported value: "{kind}": supported values: {supported}')
    selector = member.get("selector")
    if not isinstance(selector, Mapping):
        selector = {}
    present = [k for k in ("exactMatch", "regexMatch", "labelMatch") if selector.get(k) is not None]
    if not present:
        raise where.error(f"{path}.selector", f'Invalid value: "object": {NO_SELECTOR}')
    if len(present) > 1:
        raise where.error(f"{path}.selector", f'Invalid value: "object": {TWO_SELECTORS}')
    which = present[0]
    value = selector[which]
    at = f"{path}.selector.{which}"
    if not isinstance(value, Mapping):
        raise where.error(at, _invalid(type(value).__name__, f"{at} must be of type object"))
    if which == "exactMatch":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise where.error(f"{at}.name", "Required value" if not name else _invalid(name, "must be a string"))
        if len(name) > MAX_NAME:
            raise where.error(f"{at}.name", f"Too long: may not be more than {MAX_NAME} bytes")
        if not _NAME_RE.match(name):
            raise where.error(f"{at}.name", _invalid(name, f"{at}.name in body should match '{NAME_PATTERN}'"))
        if kind == "HyperNode" and (problem := rules.label_key_problem(name)):  # the webhook's IsQualifiedName
            raise where.error(f"{at}.name", _invalid(name, f"member exactMatch validate failed [{problem}]"))
        return Member(kind, exact=name)
    if which == "regexMatch":
        pattern = value.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise where.error(f"{at}.pattern", "Required value")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise where.error(
                f"{at}.pattern", _invalid(pattern, f"member regexMatch pattern is invalid: {exc}")
            ) from None
        return Member(kind, pattern=compiled)
    if kind != "Node":
        raise where.error(at, 'Invalid value: "object": labelMatch takes effect only for members of type Node')
    return Member(kind, labels=parse_label_selector(where, value, at))


# ---------------------------------------------------------------------------------------------- the tree


@dataclass
class Tree:
    """Each node's HyperNode per tier (tier -> HyperNode name), and the tiers, widest first."""

    tiers: tuple[int, ...]
    of_node: dict[str, dict[int, str]] = field(default_factory=dict)

    def topology(self) -> levels.Topology:
        return levels.Topology(TOPOLOGY, tuple(tier_key(t) for t in self.tiers))


def build_tree(hypernodes: Iterable[HyperNode], nodes: Iterable[Node]) -> Tree:
    """Resolve the members, check the tree, and give each node its HyperNode at every tier (module docstring)."""
    by_name = {h.name: h for h in hypernodes}
    node_list = list(nodes)
    parent: dict[str, str] = {}  # HyperNode -> the HyperNode it is a member of
    owner: dict[tuple[str, int], str] = {}  # (node, tier) -> the HyperNode of that tier it is a member of
    children: dict[str, list[str]] = {}
    direct: dict[str, list[str]] = {}  # HyperNode -> its Node members
    for h in sorted(by_name.values(), key=lambda h: h.name):
        where = Where(h.source, f"{KIND} {h.name}")
        for i, m in enumerate(h.members):
            path = f"spec.members[{i}]"
            if m.type == "HyperNode":
                found = [c for c in sorted(by_name) if m.matches(c, {})]
                if m.exact and not found:
                    raise where.error(f"{path}.selector.exactMatch.name", f"no {KIND} named {m.exact!r}")
                for c in found:
                    child = by_name[c]
                    if child.tier >= h.tier:
                        raise where.error(
                            path, f"{KIND} {c} has tier {child.tier}: a member must be of a lower tier than {h.tier}"
                        )
                    _claim(parent, c, h, where, path, f"{KIND} {c}")
                    children.setdefault(h.name, []).append(c)
            else:
                for node in node_list:
                    if m.matches(node.name, node.labels):
                        _claim(owner, (node.name, h.tier), h, where, path, f"Node {node.name}")
                        direct.setdefault(h.name, []).append(node.name)
    tree = Tree(tuple(sorted({h.tier for h in by_name.values()}, reverse=True)))

    def walk(name: str, above: dict[int, str]) -> None:
        here = {**above, by_name[name].tier: name}
        for node in direct.get(name, []):
            tree.of_node[node] = {**tree.of_node.get(node, {}), **here}
        for child in children.get(name, []):
            walk(child, here)

    for root in sorted(h for h in by_name if h not in parent):
        walk(root, {})
    return tree


def _claim(owners: dict, key: Any, hypernode: HyperNode, where: Where, path: str, what: str) -> None:
    """A HyperNode is a member of one HyperNode, a node of one per tier: a second would make two trees."""
    other = owners.setdefault(key, hypernode.name)
    if other != hypernode.name:
        raise where.error(path, f"{what} is already a member of {KIND} {other}")


def label_nodes(tree: Tree, nodes: Iterable[Node]) -> None:
    """Set each node's tier labels (module docstring: a missing tier takes the nearest HyperNode below it)."""
    for node in nodes:
        for key in [k for k in node.labels if k.startswith(TIER_PREFIX)]:  # the tree's own: a stale tier goes
            del node.labels[key]
        mine = tree.of_node.get(node.name)
        if not mine:
            continue
        below = ""
        for tier in sorted(tree.tiers):
            below = mine.get(tier, below)
            if below:
                node.labels[tier_key(tier)] = below
        # A tier below every HyperNode holding the node: the node stands alone there.
        for tier in tree.tiers:
            node.labels.setdefault(tier_key(tier), node.name)


# ---------------------------------------------------------------------------------------------- PodGroup


LOWEST = f"{TIER_PREFIX}lowest"  # placeholders until the tree is known (``resolve``)
HIGHEST = f"{TIER_PREFIX}highest"


def network_topology(where: Where, spec: Mapping[str, Any]) -> tuple[str, str]:
    """A Volcano PodGroup's ``spec.networkTopology`` as (required, preferred) levels: ``hard`` with
    ``highestTierAllowed`` N keeps the gang inside one HyperNode of tier N (the tier-N label required); ``soft``
    prefers one HyperNode of the lowest tier (``LOWEST``, resolved against the tree by ``resolve``) and may cross."""
    value = spec.get("networkTopology")
    if value is None:
        return "", ""
    path = "spec.networkTopology"
    if not isinstance(value, Mapping):
        raise where.error(path, _invalid(type(value).__name__, f"{path} must be of type object"))
    mode = value.get("mode", "hard")  # +kubebuilder:default=hard
    if mode not in MODES:
        raise where.error(f"{path}.mode", f'Unsupported value: "{mode}": supported values: "hard", "soft"')
    highest = value.get("highestTierAllowed")
    if highest is not None and (not isinstance(highest, int) or isinstance(highest, bool) or highest < 0):
        raise where.error(
            f"{path}.highestTierAllowed",
            _invalid(highest, f"{path}.highestTierAllowed in body should be greater than or equal to 0"),
        )
    if value.get("highestTierName"):
        if highest is not None:
            raise where.error(
                f"{path}.highestTierName",
                "Forbidden: highestTierName and highestTierAllowed cannot be set simultaneously",
            )
        raise where.error(f"{path}.highestTierName", "not supported here: name the tier with highestTierAllowed")
    if mode == "soft":
        return "", LOWEST
    return (tier_key(highest) if highest is not None else HIGHEST), ""


def resolve(key: str, tree: Tree | None) -> str:
    """A placeholder level (soft: the lowest tier; hard without a tier: the highest) as the tree's label."""
    if key not in (LOWEST, HIGHEST) or tree is None or not tree.tiers:
        return key
    return tier_key(tree.tiers[-1] if key == LOWEST else tree.tiers[0])
