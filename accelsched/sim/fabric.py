"""``simulate --fabric``: the trace's nodes grouped into blocks of NVLink domains, its multi-GPU pods turned into
gangs, each gang placed all or nothing by Kueue's TAS BestFit (fabric.placement) on the simulator's arrays.

The fabric. The nodes are sorted by (GPU model, GPUs per node, CPU, memory, name) and cut, within each (model,
GPUs) group, into NVLink domains of ``domain_size`` nodes (``nvidia.com/gpu.clique``, one rack each, NVL72-like;
a group's last domain may be smaller); consecutive domains form blocks of ``block_domains``
(``cloud.provider.com/topology-block``). Kueue's Topology: block, clique, ``kubernetes.io/hostname``.

The gang rule (the openb trace has no gangs; deterministic, no random draw):
1. the trace's pods asking for at least ``gang_gpus`` whole GPUs, in creation order (ties by trace line), are
   the gangs' seeds; every other pod runs alone, as in ``--mode timeline``;
2. a seed joins the open gang of its shape (GPUs, CPU, memory, GPU models) when it arrives within ``window``
   seconds (the trace's own clock, before ``--compress``) of that gang's first pod; otherwise it opens a new one;
3. each seed stands for ``scale`` pods of its gang (the trace's pod being one of a data-parallel job's workers):
   a gang of s seeds has s x scale pods, arrives with its first seed, and all its pods leave together after the
   longest seed's run time (never, if one of them never ended in the trace).
The request (``topology``): ``required``: one NVLink domain when the gang fits one (of the empty cluster), else
one block; ``preferred``: an NVLink domain preferred (climbing as Kueue's preferred level does); ``none``: no
request, the gang's pods placed one by one by the policy, all or nothing.

Reported per run: each gang's wait, the domains it used against the fewest that could hold it on the empty
cluster, and the free nodes stranded in domains too broken for any queued gang (``stranded``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from accelsched.fabric import levels, placement
from accelsched.sim import timeline
from accelsched.sim.fragmentation import trace_typical_pods
from accelsched.sim.policies import PodShape
from accelsched.sim.replay import FastEngine, shapes_of
from accelsched.sim.timeline import Arrivals, Placed, Timeline, Waiting
from accelsched.sim.trace import Nodes, Pods

BLOCK = "cloud.provider.com/topology-block"
CLIQUE = levels.CLIQUE
TOPOLOGY = "fabric"
TOPOLOGIES = ("required", "preferred", "none")


@dataclass(frozen=True)
class GangRule:
    """How trace pods become gangs (the module docstring's rule); the CLI's --gang-* options."""

    gang_gpus: int = 2
    window: int = 86_400
    scale: int = 4
    big: int = 8  # pods: a gang this big or bigger is a "big gang" in the report


def topology_doc(name: str = TOPOLOGY) -> dict:
    """Kueue's Topology for the fabric: block, NVLink domain, host."""
    return {
        "apiVersion": levels.API_VERSION,
        "kind": levels.KIND,
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": CLIQUE}, {"nodeLabel": levels.HOSTNAME}]},
    }


@dataclass
class Fabric:
    """Each node's NVLink domain and each domain's block (indices into ``domains`` and ``blocks``)."""

    domain: np.ndarray
    domain_block: np.ndarray
    blocks: tuple[str, ...]
    domains: tuple[str, ...]
    domain_size: int

    @property
    def block(self) -> np.ndarray:
        """Each node's block."""
        return self.domain_block[self.domain]

    def tree(self, node_names: list[str]) -> placement.Tree:
        return placement.build_tree(
            [placement.Level(BLOCK, self.block, self.blocks), placement.Level(CLIQUE, self.domain, self.domains)],
            node_names,
        )

    def per_domain(self, per_node: np.ndarray) -> np.ndarray:
        """A per-node count summed per NVLink domain."""
        return np.bincount(self.domain, weights=per_node, minlength=len(self.domains)).astype(np.int64)


def group_nodes(nodes: Nodes, domain_size: int = 18, block_domains: int = 4) -> Fabric:
    """The fabric over ``nodes`` (module docstring): alike nodes share a domain, so a domain is one kind of tray."""
    order = sorted(
        range(nodes.n),
        key=lambda i: (
            nodes.models[nodes.model[i]],
            int(nodes.gpus[i]),
            int(nodes.cpu[i]),
            int(nodes.memory[i]),
            nodes.names[i],
        ),
    )
    domain = np.zeros(nodes.n, dtype=np.int64)
    count, filled, kind = -1, domain_size, None
    for i in order:
        this = (int(nodes.model[i]), int(nodes.gpus[i]))
        if filled == domain_size or this != kind:
            count, filled, kind = count + 1, 0, this
        domain[i] = count
        filled += 1
    n_domains = count + 1
    block_of_domain = np.arange(n_domains) // block_domains
    names = tuple(f"openb.nvl{d:03}" for d in range(n_domains))  # GFD's "<cluster UUID>.<clique id>"
    blocks = tuple(f"block-{b:02}" for b in range(int(block_of_domain.max()) + 1 if n_domains else 0))
    return Fabric(domain, block_of_domain, blocks, names, domain_size)


def derive_gangs(pods: Pods, rule: GangRule) -> tuple[Pods, list[list[int]]]:
    """The pods to replay (gang pods as ``scale`` copies of their seeds, with the gang's arrival and end) and what
    arrives together: each gang's pods, and every other pod alone."""
    assert pods.creation is not None and pods.deletion is not None
    creation, deletion = pods.creation.tolist(), pods.deletion.tolist()
    seeds = [i for i in sorted(range(pods.n), key=lambda i: (creation[i], i)) if pods.num_gpu[i] >= rule.gang_gpus]
    open_gangs: dict[tuple, list[int]] = {}
    gangs: list[list[int]] = []
    for i in seeds:
        key = (int(pods.num_gpu[i]), int(pods.cpu[i]), int(pods.memory[i]), int(pods.spec[i]))
        gang = open_gangs.get(key)
        if gang is not None and creation[i] - creation[gang[0]] <= rule.window:
            gang.append(i)
        else:
            open_gangs[key] = [i]
            gangs.append(open_gangs[key])
    in_gang = {i for g in gangs for i in g}
    order = [i for i in range(pods.n) if i not in in_gang]
    groups = [[k] for k in range(len(order))]
    starts, ends = [creation[i] for i in order], [deletion[i] for i in order]
    for gang in gangs:
        first = creation[gang[0]]
        end = -1 if any(deletion[i] < 0 for i in gang) else first + max(deletion[i] - creation[i] for i in gang)
        members = [i for i in gang for _ in range(rule.scale)]
        groups.append(list(range(len(order), len(order) + len(members))))
        order += members
        starts += [first] * len(members)
        ends += [end] * len(members)
    out = pods.take(np.array(order, dtype=np.int64))
    out.creation, out.deletion = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    return out, groups


def _pods_per_node(cpu: np.ndarray, memory: np.ndarray, gpus: np.ndarray, shape: PodShape, mask) -> np.ndarray:
    counts = np.full(len(cpu), np.iinfo(np.int32).max, dtype=np.int64)
    for free, amount in ((cpu, shape.cpu), (memory, shape.memory), (gpus, shape.whole)):
        if amount > 0:
            counts = np.minimum(counts, free // amount)
    if mask is not None:
        counts[~mask] = 0
    return counts


def room(engine: FastEngine, shape: PodShape, spec: int) -> np.ndarray:
    """How many pods of ``shape`` each node takes now (Kueue's fillInCounts on the simulator's columns)."""
    cluster = engine.cluster
    mask = cluster.spec_mask[spec] if spec else None
    return _pods_per_node(cluster.cpu_free, cluster.mem_free, cluster.full, shape, mask)


def empty_room(nodes: Nodes, shape: PodShape, spec_mask: np.ndarray | None) -> np.ndarray:
    """The same on the empty cluster."""
    return _pods_per_node(nodes.cpu, nodes.memory, nodes.gpus, shape, spec_mask)


def fewest_domains(domain_room: np.ndarray, pods: int) -> int:
    """The fewest domains whose room adds up to ``pods`` (largest first is optimal); 0 when all of them cannot."""
    total = np.cumsum(np.sort(domain_room)[::-1])
    return int(np.searchsorted(total, pods) + 1) if total.size and total[-1] >= pods else 0


def stranded_free_nodes(
    free: np.ndarray, domain: np.ndarray, rooms: list[np.ndarray], needs: list[np.ndarray]
) -> tuple[int, int]:
    """(stranded, usable) free nodes, ``free`` being per node (1: free). A domain is usable when some queued gang
    could use it were it empty (``needs[g]`` > 0: per domain, what gang g needs of one domain: the whole gang, or
    the whole domain's worth for a gang bigger than a domain); it is too broken when no queued gang has there the
    room (``rooms[g]``, per domain, now) for what it needs. Stranded: free nodes in usable domains too broken."""
    n_domains = int(domain.max()) + 1 if domain.size else 0
    usable = np.zeros(n_domains, dtype=bool)
    broken = np.ones(n_domains, dtype=bool)
    for r, need in zip(rooms, needs, strict=True):
        usable |= need > 0
        broken &= ~((need > 0) & (r >= need))
    return int(free[(usable & broken)[domain]].sum()), int(free[usable[domain]].sum())


def nearest_rank(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank on the sorted values; 0 for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


@dataclass
class GangRecord:
    pods: int
    arrival: int
    wait: int = -1  # -1: never placed
    domains: int = 0  # NVLink domains used
    fewest: int = 0  # the fewest that could hold it on the empty cluster
    violated: bool = False  # a required level left (never expected: checked by the tests)


@dataclass
class FabricArrivals(Arrivals):
    """Gangs (``derive_gangs``) placed with Kueue's BestFit on ``fabric``; other pods alone by the policy."""

    nodes: Nodes
    fabric: Fabric
    groups_of: list[list[int]]
    shapes: list[PodShape]
    specs: list[int]
    topology: str = "required"
    records: dict[int, GangRecord] = field(default_factory=dict)  # by the gang's first pod
    stranded_time: float = 0.0  # node-seconds, while a gang waits
    free_time: float = 0.0  # node-seconds of free nodes in domains a queued gang could use, while one waits
    queued_time: float = 0.0  # seconds during which a gang waited
    _last: int = 0
    _now: tuple[int, int] = (0, 0)  # stranded and free nodes in the state the last instant left
    _queued: bool = False  # whether a gang waited in that state
    _tree: placement.Tree | None = None
    _empty: dict[tuple[PodShape, int], np.ndarray] = field(default_factory=dict)

    def groups(self, pods: Pods) -> list[list[int]]:
        return self.groups_of

    def _empty_domains(self, engine: FastEngine, shape: PodShape, spec: int) -> np.ndarray:
        key = (shape, spec)
        if key not in self._empty:
            mask = engine.cluster.spec_mask[spec] if spec else None
            self._empty[key] = self.fabric.per_domain(empty_room(self.nodes, shape, mask))
        return self._empty[key]

    def _ask(self, engine: FastEngine, shape: PodShape, spec: int, count: int) -> tuple[placement.Ask, bool]:
        """Where the gang's request sits in the tree (block 0, NVLink domain 1) and whether it is required."""
        if self.topology == "preferred":
            return placement.Ask(1, topology=TOPOLOGY), False
        fits_one = self._empty_domains(engine, shape, spec).max(initial=0) >= count
        return placement.Ask(1 if fits_one else 0, topology=TOPOLOGY), True

    def fits_empty(self, engine: FastEngine, shapes: list[PodShape], specs: list[int], group: list[int]) -> bool:
        first = group[0]
        if len(group) == 1:
            return super().fits_empty(engine, shapes, specs, group)
        per_domain = self._empty_domains(engine, shapes[first], specs[first])
        if self.topology == "required" and per_domain.max(initial=0) < len(group):
            per_block = np.bincount(self.fabric.domain_block, weights=per_domain)
            return bool(per_block.max(initial=0) >= len(group))
        return bool(per_domain.sum() >= len(group))

    def start(
        self, engine: FastEngine, shapes: list[PodShape], specs: list[int], group: list[int], now: int
    ) -> Placed | None:
        if len(group) == 1:
            return super().start(engine, shapes, specs, group, now)
        shape, spec = shapes[group[0]], specs[group[0]]
        record = self.records.setdefault(group[0], GangRecord(len(group), now))
        if self.topology == "none":
            placed = self._one_by_one(engine, shape, spec, len(group))
        else:
            if self._tree is None:
                self._tree = self.fabric.tree(self.nodes.names)
            ask, required = self._ask(engine, shape, spec, len(group))
            result = ask.place(self._tree, room(engine, shape, spec), len(group), required)
            placed = [(node, engine.cluster.place(node, shape)) for node in result.nodes] if result.fits else None
            if placed is not None and required:
                codes = self.fabric.domain if ask.level == 1 else self.fabric.block
                record.violated = len({int(codes[n]) for n, _ in placed}) != 1
        if placed is None:
            return None
        record.wait = now - record.arrival
        record.domains = len({int(self.fabric.domain[n]) for n, _ in placed})
        record.fewest = fewest_domains(self._empty_domains(engine, shape, spec), len(group))
        return placed

    @staticmethod
    def _one_by_one(engine: FastEngine, shape: PodShape, spec: int, count: int) -> Placed | None:
        """No topology request: the policy places the pods one at a time; all or nothing."""
        placed: Placed = []
        for _ in range(count):
            one = engine.schedule(shape, spec)
            if one is None:
                for node, gpus in placed:
                    engine.cluster.remove(node, shape, gpus)
                return None
            placed.append(one)
        return placed

    def instant(self, now: int, engine: FastEngine, waiting: Waiting) -> None:
        """Stranded and free nodes are counted on the state this instant leaves, and weighted by how long it
        lasts (until the next instant); only while a gang waits."""
        span, self._last = now - self._last, now
        self.stranded_time += span * self._now[0]
        self.free_time += span * self._now[1]
        self.queued_time += span * self._queued
        gangs = waiting.in_order(more_than=1)
        self._queued = bool(gangs)
        if not gangs:
            self._now = (0, 0)
            return
        free = ((engine.cluster.full == self.nodes.gpus) & (self.nodes.gpus > 0)).astype(np.int64)
        rooms, needs = [], []
        for g in gangs:
            shape, spec = self.shapes[g[0]], self.specs[g[0]]
            rooms.append(self.fabric.per_domain(room(engine, shape, spec)))
            needs.append(np.minimum(self._empty_domains(engine, shape, spec), len(g)))
        self._now = stranded_free_nodes(free, self.fabric.domain, rooms, needs)

    @property
    def stranded(self) -> float:
        """The share of free node-time stranded while gangs waited."""
        return self.stranded_time / self.free_time if self.free_time else 0.0

    @property
    def stranded_nodes(self) -> float:
        """Stranded free nodes on average while gangs waited."""
        return self.stranded_time / self.queued_time if self.queued_time else 0.0

    @property
    def free_nodes(self) -> float:
        """Free nodes (in domains a queued gang could use) on average while gangs waited."""
        return self.free_time / self.queued_time if self.queued_time else 0.0


@dataclass
class FabricRun:
    """One replay's figures (``simulate --fabric``'s row)."""

    policy: str
    topology: str
    seed: int
    gangs: list[GangRecord]
    stranded: float  # share of free node-time stranded while gangs waited
    stranded_nodes: float  # mean stranded free nodes while gangs waited
    free_nodes: float  # mean free nodes (in domains a queued gang could use) while gangs waited
    timeline: Timeline
    big: int


def figures(runs: list[FabricRun]) -> dict:
    """One row over ``runs`` (one policy and request, one run per seed): the gangs of every seed pooled, the
    stranded share and allocation averaged."""
    first = runs[0]
    gangs = [g for r in runs for g in r.gangs]
    big = [g for g in gangs if g.pods >= first.big]
    placed = [g for g in big if g.wait >= 0]
    waits = [float(g.wait) for g in placed]
    over = [g.domains - g.fewest for g in placed]
    return {
        "policy": first.policy,
        "topology": first.topology,
        "seeds": [r.seed for r in runs],
        "gangs": len(gangs),
        "big_gangs": len(big),
        "big_gangs_placed": len(placed),
        "big_gang_wait_p50_s": nearest_rank(waits, 0.5),
        "big_gang_wait_p95_s": nearest_rank(waits, 0.95),
        "domains_used": sum(g.domains for g in placed),
        "domains_minimum": sum(g.fewest for g in placed),
        "domains_over_minimum_mean": float(np.mean(over)) if over else 0.0,
        "domains_over_minimum_max": max(over, default=0),
        "stranded_free_node_share": float(np.mean([r.stranded for r in runs])),
        "stranded_free_nodes_mean": float(np.mean([r.stranded_nodes for r in runs])),
        "free_nodes_mean": float(np.mean([r.free_nodes for r in runs])),
        "required_level_violations": sum(g.violated for g in gangs),
        "mean_allocation": float(np.mean([r.timeline.mean_allocation() for r in runs])),
        "unschedulable_pods": sum(r.timeline.unschedulable for r in runs),
        "pods_never_ran": sum(r.timeline.never for r in runs),
        "seconds": float(np.mean([r.timeline.seconds for r in runs])),
    }


def replay_fabric(
    nodes: Nodes,
    pods: Pods,
    policy: str,
    seed: int,
    rule: GangRule,
    fabric: Fabric,
    topology: str = "required",
    tie_break: str = "paper",
    compress: float = 1.0,
) -> FabricRun:
    """The time-based replay (sim/timeline.py's queue rule) with the trace's multi-GPU pods as gangs."""
    typical = trace_typical_pods(pods, nodes.models)  # of the trace as it is, before the gangs' copies
    replayed, groups = derive_gangs(pods, rule)
    arrivals = FabricArrivals(nodes, fabric, groups, shapes_of(replayed), replayed.spec.tolist(), topology)
    run = timeline.replay(nodes, replayed, policy, seed, typical, tie_break, compress, arrivals=arrivals)
    gangs = list(arrivals.records.values())
    return FabricRun(
        policy, topology, seed, gangs, arrivals.stranded, arrivals.stranded_nodes, arrivals.free_nodes, run, rule.big
    )
