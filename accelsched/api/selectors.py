"""Label selectors, node selector terms, taints and tolerations: the matching rules of Kubernetes.

These are the per-object rules; the engine vectorizes them over nodes by evaluating each rule once per
distinct label value (see cluster.state), never once per node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = (*LABEL_SELECTOR_OPERATORS, "Gt", "Lt")


_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): ASCII digits with an optional sign, in int64 range; None otherwise.

    Python's int() is laxer (underscores, spaces, non-ASCII digits, any size), so it is not used directly.
    """
    if not _INT64_RE.fullmatch(text):
        return None
    sign = "-" if text[0] == "-" else ""
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # out of range anyway, and int() of 5,000 digits raises
        return None
    value = int(sign + digits)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions entry (label selector or node selector requirement)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches_value(self, present: bool, value: str | None) -> bool:
        """Whether a label with this presence/value satisfies the requirement."""
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        # Gt / Lt: both sides must parse as integers, otherwise no match (as in Kubernetes).
        if not present:
            return False
        have, want = parse_int64(value or ""), parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.matches_value(self.key in labels, labels.get(self.key))


@dataclass(frozen=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels and matchExpressions ANDed. An empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def with_labels(self, extra: Mapping[str, str]) -> LabelSelector:
        """The selector ANDed with key=value pairs (matchLabelKeys merges the pod's own values this way)."""
        merged = dict(self.match_labels)
        merged.update(extra)
        return LabelSelector(tuple(sorted(merged.items())), self.match_expressions)


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Terms are ORed; inside a term matchExpressions (labels) and matchFields (metadata.name) are ANDed.

    An empty term matches nothing, as in Kubernetes.
    """

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(req.matches(labels) for req in self.match_expressions):
            return False
        return all(req.matches({"metadata.name": node_name}) for req in self.match_fields)


def terms_match(terms: tuple[NodeSelectorTerm, ...], node_name: str, labels: Mapping[str, str]) -> bool:
    return any(term.matches(node_name, labels) for term in terms)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = field(default=None, compare=False)

    def tolerates(self, taint: Taint) -> bool:
        """v1.Toleration.ToleratesTaint: empty effect matches all effects, empty key with Exists matches all keys."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value

    def __str__(self) -> str:
        key = self.key or "*"
        op = "exists" if self.operator == "Exists" else f"={self.value}"
        return f"{key} {op}:{self.effect or '*'}"


def tolerates_all(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def untolerated_taint(
    tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...], effects: tuple[str, ...]
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates (TaintToleration's filter rule)."""
    for taint in taints:
        if taint.effect in effects and not tolerates_all(tolerations, taint):
            return taint
    return None
