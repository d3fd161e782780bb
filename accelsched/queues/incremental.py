"""Kueue's admission kept open over time, for the simulator: workloads are submitted and finish, and each call runs
the scheduling cycles (queues.admission) over what waits, on the same quota tree.

``admission.admit`` answers for a still input; a replay submits workloads as they arrive, and their quota comes
back when they finish: the inadmissible workloads of the cohort tree then go back into their queues (Kueue's
QueueInadmissibleWorkloads on a workload's deletion), as they do after an eviction.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from accelsched.api.objects import Namespace, Node, Pod
from accelsched.queues import admissionfairsharing
from accelsched.queues.admission import Outcome, QueueResult, _Admission
from accelsched.queues.api import ClusterQueue, QueueObjects
from accelsched.queues.pending import Pending
from accelsched.queues.preemption import Admitted, Target
from accelsched.queues.workloads import Info


class OutcomeOrder:
    """The open admission's outcomes in the order they came (as the list a still admission keeps), a workload
    leaving in one step: the Workload door forgets one each time a Workload finishes, and a list's remove read
    the whole backlog each time (thousands waiting in Kueue's performance harness)."""

    def __init__(self, outcomes: Iterable[Outcome] = ()) -> None:
        self._by_id: dict[int, Outcome] = {id(o): o for o in outcomes}

    def __iter__(self) -> Iterator[Outcome]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, item: object) -> bool:
        return self._by_id.get(id(item)) is item

    def append(self, outcome: Outcome) -> None:
        self._by_id[id(outcome)] = outcome

    def remove(self, outcome: Outcome) -> None:
        if self._by_id.get(id(outcome)) is not outcome:
            raise ValueError("not an outcome of this admission")
        del self._by_id[id(outcome)]


class OpenAdmission(_Admission):
    """``submit`` workloads, ``finish`` them, ``run_cycles`` to admit: it returns what was admitted and evicted."""

    def __init__(
        self,
        objects: QueueObjects,
        namespaces: Iterable[Namespace] = (),
        nodes: Iterable[Node] = (),
        pods: list[Pod] | None = None,
    ) -> None:
        self.records: dict[int, Admitted] = {}  # by id of the Info: what holds quota
        self._admitted_now: list[Outcome] = []
        self._evicted_now: list[Outcome] = []
        # the workloads the last run_cycles looked at (its heads, its victims): the only ones whose conditions it
        # changed (live mode's Workload door writes from these, not from every outcome)
        self.touched: dict[int, Outcome] = {}
        super().__init__(objects, pods or [], namespaces, nodes)
        self.outcomes: OutcomeOrder = OutcomeOrder(self.outcomes)  # type: ignore[assignment]
        self.queues: dict[str, Pending[Outcome]] = {}
        self.by_key = {o.info.key: o for o in self.outcomes}  # the last submitted of a key (live mode's lookups)
        # past every input order given so far: the next workload submitted after the others (live mode's order)
        self.next_order = max((o.info.order for o in self.outcomes), default=-1) + 1

    @classmethod
    def start(
        cls, objects: QueueObjects, pods: list[Pod], namespaces: Iterable[Namespace], nodes: Iterable[Node]
    ) -> QueueResult:
        """``admission.admit`` over the input (its running workloads held, the others admitted as far as they go),
        kept open: the result's ``admission`` takes workloads arriving and finishing after it (``submit``,
        ``finish``, ``run_cycles``), as Kueue's cache and queue manager follow each event."""
        self = cls(objects, namespaces, nodes, pods)
        self.queues = self._initial_queues()
        self.run_cycles()
        result = self._result()
        result.admission = self
        return result

    def forget(self, outcome: Outcome) -> None:
        """The workload is gone (deleted, or finished: Kueue's workload controller drops it from the cache and the
        queues): its quota, if it held any, is released, and it leaves the queues and the outcomes."""
        if id(outcome.info) in self.records:
            self.finish(outcome)
        for queues in (self.queues, self.inadmissible):
            pending = queues.get(outcome.cluster_queue)
            if pending:
                pending.discard(outcome)
        if self.preemptor_head.get(outcome.cluster_queue) is outcome:
            del self.preemptor_head[outcome.cluster_queue]
        if self.preempting.get(outcome.cluster_queue) is outcome:
            del self.preempting[outcome.cluster_queue]
        self.outcomes.remove(outcome)
        del self.by_info[id(outcome.info)]
        self.by_key.pop(outcome.info.key, None)
        self.classes.pop(id(outcome.info), None)

    def submit(self, info: Info) -> Outcome:
        """Queue a workload in its LocalQueue's ClusterQueue (refused with Kueue's words when there is none)."""
        outcome = self._register(info)
        cq = self._cluster_queue(outcome)
        if cq is not None:
            outcome.cluster_queue = cq.name
            self.requeue(outcome)
        return outcome

    def hold(self, info: Info, conditions: list[dict[str, str]]) -> Outcome:
        """A workload seen running (``info.admitted``: its reservation's flavors) that this admission held waiting
        or did not know: it leaves its queue and holds its quota, as a workload running in the input does (the
        running are held first, before any cycle: here it is held now, the most recently admitted).
        ``conditions``: its own, as the input's carry on."""
        known = self.by_key.get(info.key)
        if known is not None:
            self.forget(known)
        outcome = self._register(info)
        outcome.conditions = conditions
        self.touched[id(outcome)] = outcome
        cq = self._cluster_queue(outcome)
        if cq is not None:
            outcome.cluster_queue = cq.name
            self._keep_running(outcome, cq)
            self._status_changed(cq.name)
        return outcome

    def _register(self, info: Info) -> Outcome:
        """A new outcome for ``info``, last in the outcomes and found by its Info and its key."""
        outcome = Outcome(info)
        written = self.objects.workloads.get(info.key)
        if written is not None:  # live mode's Workload door: its preemption gates as the cache has them
            outcome.gates = written.preemption_gates
        self.outcomes.append(outcome)
        self.next_order = max(self.next_order, info.order + 1)
        self.by_info[id(info)] = outcome
        self.by_key[info.key] = outcome
        return outcome

    def finish(self, outcome: Outcome) -> None:
        """The workload ended: its quota is released and the cohort tree's inadmissible workloads are retried."""
        record = self.records.pop(id(outcome.info))
        if self.afs is not None:
            self.afs.released(outcome.info)
        self.preemptor.remove(record)
        self.admitted[record.cluster_queue].remove(record)
        self._advance(record.cluster_queue)
        outcome.admitted, outcome.preempting_message = False, ""  # its preemptions, if any, are long done
        # a workload leaving its quota asks the requeuer to retry its tree; served by the next run_cycles
        self.requeue_pending.add(id(self.tree.cluster_queues[record.cluster_queue].root()))
        self._status_changed(record.cluster_queue)

    def release(self, outcome: Outcome) -> None:
        """Admitted but not placeable after all: its quota goes back and it leaves the queues (the caller
        resubmits it when capacity frees)."""
        self.finish(outcome)

    def requeue(self, outcome: Outcome) -> None:
        """A workload into its queue (a new one, or one released), as Kueue's PushOrUpdate puts a workload the heap
        does not hold: straight into the inadmissible set, untried, when its BestEffortFIFO queue bulk-moved its
        equivalence class there since the set was last requeued (a new arrival of a class that does not fit waits
        with it, and gets no Pending condition of its own until a requeue tries it)."""
        name = outcome.cluster_queue
        failed = self.bulk_moved.get(name, {}).get(self._equivalence(outcome.info))
        if failed is not None:
            self._set_aside(outcome, name, failed)
        else:
            self._queue(self.queues, name).add(outcome)

    def advance(self, now: float) -> None:
        """The clock moves to ``now`` (seconds): admission fair sharing's sampling ticks decay each LocalQueue's
        usage toward what it has admitted (queues.admissionfairsharing), and the cohort history of accelsched's
        extension each ClusterQueue's (queues.cohortusage)."""
        if self.cohort_history is not None:
            self.cohort_history.advance(now)
        if self.afs is not None:
            usage: list[dict[str, dict[str, float]]] = []  # summed once, and only when a tick is due

            def admitted(key: str) -> dict[str, float]:
                if not usage:
                    usage.append(self._local_queue_usage())
                return usage[0].get(key, {})

            self.afs.advance(now, self._fair_local_queues(), admitted)

    def run_cycles(self) -> tuple[list[Outcome], list[Outcome]]:
        """Kueue's cycles until nothing more moves: (admitted, evicted) by this call, each once, in order. A
        workload can be in both: evicted, then admitted again in a later cycle of the same call."""
        self._admitted_now, self._evicted_now, self.touched = [], [], {}
        self._cycles(self.queues)
        if self.afs is not None and self.afs.pending():
            # the Workload controller settles each entry penalty as its workload turns Admitted
            keys = self.afs.pending()
            usage = self._local_queue_usage(keys)
            for key in keys:
                self.afs.settle(key, usage.get(key, {}))
        evicted = list({id(o): o for o in self._evicted_now}.values())
        admitted = [o for o in {id(o): o for o in self._admitted_now}.values() if o.admitted]
        return admitted, evicted

    def waiting(self) -> Iterable[Outcome]:
        for pending in self.queues.values():
            yield from pending
        for inadmissible in self.inadmissible.values():
            yield from inadmissible

    def _fair_local_queues(self) -> list[str]:
        config = self.objects.config
        return [
            key
            for key, lq in self.objects.local_queues.items()
            if (cq := self.objects.cluster_queues.get(lq.cluster_queue)) is not None
            and admissionfairsharing.enabled(config, cq)
        ]

    def _local_queue_usage(self, keys: Collection[str] | None = None) -> dict[str, dict[str, float]]:
        """cacheLq.GetAdmittedUsage per LocalQueue (of ``keys``, else every one): its admitted workloads' usage,
        flavors summed. With ``keys``, only their ClusterQueues' workloads are read (a LocalQueue's all hold quota in
        its one ClusterQueue, read in the same order: the same sums), not every workload admitted, each round."""
        groups: Iterable[list[Admitted]] = self.admitted.values()
        if keys is not None:
            keys = set(keys)
            local_queues = self.objects.local_queues
            names = dict.fromkeys(local_queues[k].cluster_queue for k in keys if k in local_queues)
            groups = [self.admitted.get(name, []) for name in names]
        out: dict[str, dict[str, float]] = {}
        for records in groups:
            for record in records:
                key = f"{record.info.namespace}/{record.info.queue_name}"
                if keys is not None and key not in keys:
                    continue
                usage = out.setdefault(key, {})
                for (_, name), amount in record.usage.items():
                    usage[name] = usage.get(name, 0.0) + admissionfairsharing.kueue_amount(name, amount)
        return out

    # the base class's hooks, recorded

    def _head(self, cq: ClusterQueue, pending: Pending[Outcome]) -> Outcome:
        head = super()._head(cq, pending)
        self.touched[id(head)] = head
        return head

    def _hold(self, outcome: Outcome, cq: ClusterQueue, usage: dict[tuple[str, str], int]) -> None:
        super()._hold(outcome, cq, usage)
        self.records[id(outcome.info)] = self.admitted[cq.name][-1]
        self._admitted_now.append(outcome)

    def _evict(self, target: Target, preemptor_info: Info, queues: dict[str, Pending[Outcome]]) -> None:
        super()._evict(target, preemptor_info, queues)
        self.records.pop(id(target.workload.info), None)
        if self.afs is not None:
            self.afs.released(target.workload.info)
        victim = self.by_info[id(target.workload.info)]
        self._evicted_now.append(victim)
        self.touched[id(victim)] = victim
