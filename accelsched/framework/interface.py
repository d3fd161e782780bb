"""The extension points of kube-scheduler's framework, in columnar form.

PreFilter, Filter, PostFilter, PreScore, Score, NormalizeScore, Reserve, Permit, PreBind and Bind keep their
kube-scheduler names and order. The one deliberate change: Filter and Score see every node at once. A Filter
returns, per reason string, a boolean mask of the nodes it rejects; a Score returns an int64 array over the
feasible nodes (or a constant when it cannot tell nodes apart, which lets the cycle skip it).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from accelsched.api.objects import Pod
    from accelsched.cluster.state import ClusterState

MAX_NODE_SCORE = 100


class Code(enum.Enum):
    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    WAIT = "Wait"
    SKIP = "Skip"


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


class PluginError(Exception):
    """A Filter's Error status (fwk.Error): it aborts the pod's scheduling attempt as a whole, which fails with
    ``running "<plugin>" filter plugin: <message>`` (RunFilterPlugins), never a per-node rejection."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


def unschedulable(plugin: str, *reasons: str, resolvable: bool = True) -> Status:
    code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, reasons, plugin)


@dataclass
class Rejection:
    """Nodes a filter rejects for one reason. A node may be in several rejections of the same filter."""

    reason: str
    nodes: np.ndarray
    resolvable: bool = True


@dataclass
class FilterResult:
    rejections: list[Rejection] = field(default_factory=list)

    def reject(self, reason: str, nodes: np.ndarray, resolvable: bool = True) -> None:
        if nodes.any():
            self.rejections.append(Rejection(reason, nodes, resolvable))

    def rejected(self, n: int) -> np.ndarray:
        if len(self.rejections) == 1:
            return self.rejections[0].nodes
        mask = np.zeros(n, dtype=bool)
        for r in self.rejections:
            mask |= r.nodes
        return mask


PASS = FilterResult()


@dataclass(frozen=True)
class NodeScore:
    """A score that depends only on each node's own state and the pod's request shape, with no normalization
    across nodes. The cycle then keeps the weighted total per request shape in ClusterState.node_values and
    updates it at changed nodes only, so scoring a pod costs one lookup instead of a pass per plugin."""

    key: Hashable
    compute: Callable[[np.ndarray], np.ndarray]  # scores of the given node indices
    compute_one: Callable[[int], int]  # the same for one node, in plain Python

    def values(self, cluster: ClusterState) -> np.ndarray:
        return cluster.node_values(self.key, self.compute, self.compute_one)


class CycleState(dict[str, Any]):
    """Per-cycle data shared between a plugin's extension points, under the plugin's own key."""

    def __init__(self) -> None:
        super().__init__()
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self.total_key: Hashable | None = None  # the cached weighted total this cycle scored with
        self.best_nodes: list[int] | None = None  # its best nodes, when every node was feasible
        self.allowed: np.ndarray | None = None  # nodes a gang member may use (its gang's topology domain)
        # PreFilterResult.NodeNames: the only nodes the filters may see, and the plugins that narrowed them to those
        # (narrow_nodes); every other node is "node(s) didn't satisfy plugin(s) [...]", unresolvably.
        self.pre_filter_nodes: np.ndarray | None = None
        self.pre_filter_plugins: set[str] = set()
        # The nodes no earlier Filter rejected, while filters run (None: every node). kube-scheduler runs a node's
        # filters only until one rejects it, so a filter whose evaluation has effects (DynamicResources: an Error
        # on a node aborts the cycle) evaluates only these.
        self.feasible_nodes: np.ndarray | None = None

    def narrow_nodes(self, plugin: str, nodes: np.ndarray) -> None:
        """PreFilterResult.Merge: a PreFilter plugin's node set intersects those of the plugins before it."""
        self.pre_filter_nodes = nodes if self.pre_filter_nodes is None else self.pre_filter_nodes & nodes
        self.pre_filter_plugins.add(plugin)


@dataclass
class NodeExplanation:
    """What a filter says about one node it rejected: the facts behind the reason, and what would fix it."""

    details: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)


class Plugin(Protocol):
    name: str


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    """Runs before a pod enters the active queue; a pod it rejects waits, untried, until it is updated
    (kube-scheduler's PreEnqueue: SchedulingGates)."""

    name: str

    def pre_enqueue(self, pod: Pod) -> Status: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> Status: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> FilterResult: ...

    def explain(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> NodeExplanation: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    def post_filter(self, state: CycleState, pod: Pod, handle: Any, diagnosis: Any) -> tuple[Any, Status]:
        """``handle`` is the Scheduler (kube-scheduler's framework.Handle); returns (a nomination or None, status)."""
        ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, pod: Pod, cluster: ClusterState, feasible: np.ndarray) -> np.ndarray | int:
        """Raw scores for the feasible node indices, normalized to 0..MAX_NODE_SCORE (NormalizeScore folded in)."""
        ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: str

    def reserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: str

    def permit(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> tuple[Status, float]: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: str

    def pre_bind(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    name: str

    def bind(self, state: CycleState, pod: Pod, cluster: ClusterState, node: int) -> Status: ...


@runtime_checkable
class QueueingHintPlugin(Protocol):
    """kube-scheduler's EnqueueExtensions with a QueueingHint for pod binds: may ``bound`` help ``waiting``, a pod
    this plugin rejected? Without one, a bind never moves a pod this plugin rejected back to the active queue."""

    name: str

    def queueing_hint(self, waiting: Pod, bound: Pod) -> bool: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: str

    def sort_key(self, pod: Pod, seq: int) -> tuple[Any, ...]: ...


def default_normalize(scores: np.ndarray, reverse: bool = False) -> np.ndarray:
    """helper.DefaultNormalizeScore: scale to 0..100 by the maximum, optionally reversed."""
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        return np.full(scores.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    out = scores * MAX_NODE_SCORE // top
    return MAX_NODE_SCORE - out if reverse else out
