"""What-if: cordon, drain, taint or add nodes on a copy of the state, re-run the engine, and say what changed.

The actions are those of ``kubectl cordon/uncordon/drain/taint`` and of adding nodes of a type, applied to raw
dicts of a ``RawState.copy()``: nothing reaches the state the page shows, let alone a cluster. A bad body is
refused whole, before anything runs, with an InputError naming the field (``actions[1].taint``), as the API
server names the field of a bad object.

A cordon is what a cluster shows a moment later: ``spec.unschedulable`` and the
``node.kubernetes.io/unschedulable:NoSchedule`` taint the node lifecycle controller adds for it; uncordon takes off
both (the controller removes the taint once the flag is gone), so uncordoning a node cordoned in a cluster frees it.

drain is ``kubectl drain --force --ignore-daemonsets --delete-emptydir-data``: plain ``kubectl drain`` refuses a node
with bare pods, pods with emptyDir volumes or DaemonSet pods, and the notes name the pods that need each flag.
Mirror pods (static pods, ``kubernetes.io/config.mirror``) are never evicted: kubectl drain skips them, and when the
taint manager deletes one for a NoExecute taint the kubelet puts it back on the same node. PodDisruptionBudgets are
not modelled: an eviction they would refuse happens here.

A drain may leave a gang short of minMember (kubectl drain deletes bare pods): nothing in a cluster refuses that,
so the changed state marks the gang (``RawState.changed_gangs``) and is run as the cluster would run it, the
members still bound counting toward minMember; the notes say what became of each gang.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelsched.api.objects import DEVICES_ANNOTATION
from accelsched.api.selectors import Taint, Toleration
from accelsched.api.validation import label_key_problem, label_value_problem
from accelsched.errors import InputError
from accelsched.framework import gang
from accelsched.plugins.nodeunschedulable import UNSCHEDULABLE_TAINT as _UNSCHEDULABLE
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION
from accelsched.ui.state import WHATIF_COPY_ANNOTATION, RawState, Run, clone, object_key

OPS = ("cordon", "uncordon", "drain", "taint", "add")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # core/v1 TaintEffect values the API server accepts
MAX_ACTIONS = 100
MAX_COUNT = 1000
MAX_NODES = 10000
HOSTNAME_LABEL = "kubernetes.io/hostname"
# core/v1 well_known_taints.go: TaintNodeUnschedulable, the taint the node lifecycle controller keeps on a cordoned
# node (NoSchedule), as a raw dict of the one NodeUnschedulable checks; every node.kubernetes.io/ taint is one the
# node's controllers set (not-ready, unreachable, ...).
UNSCHEDULABLE_TAINT = {"key": _UNSCHEDULABLE.key, "effect": _UNSCHEDULABLE.effect}
NODE_TAINT_PREFIX = "node.kubernetes.io/"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # core/v1 MirrorPodAnnotationKey: the API's copy of a static pod
DRAIN_FLAGS = "kubectl drain --force --ignore-daemonsets --delete-emptydir-data"
READ_ONLY = "What-if only: nothing is written to the cluster."
_BIND_ANNOTATIONS = (DEVICES_ANNOTATION, NUMA_ANNOTATION, NIC_ANNOTATION)  # what our bind wrote on a pod


@dataclass
class Action:
    """One parsed action. ``nodes`` is a list of names or a ``(label, value)`` selector, resolved on apply."""

    op: str
    field: str  # "actions[i]", for errors found when applying
    nodes: list[str] | tuple[str, str] = field(default_factory=list)
    taint: dict[str, str] | None = None
    node: str = ""
    count: int = 0

    def normalized(self, names: list[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.op == "add":
            out.update(node=self.node, count=self.count)
            return out
        if names is not None:
            out["nodes"] = names
        elif isinstance(self.nodes, tuple):
            out["nodes"] = {"label": self.nodes[0], "value": self.nodes[1]}
        else:
            out["nodes"] = list(self.nodes)
        if self.taint is not None:
            out["taint"] = taint_text(self.taint)
        return out


def _bad(where: str, message: str) -> InputError:
    return InputError(message, field=where)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(where, "must be a non-empty string")
    return value


def parse(body: Any) -> list[Action]:
    """The body's actions, checked for shape and bounds (node names are checked against the state on apply)."""
    if not isinstance(body, dict):
        raise _bad("body", 'must be a JSON object {"actions": [...]}')
    unknown = sorted(set(body) - {"actions"})
    if unknown:
        raise _bad(unknown[0], "unknown field (only actions)")
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        raise _bad("actions", "must be a non-empty list")
    if len(actions) > MAX_ACTIONS:
        raise _bad("actions", f"at most {MAX_ACTIONS} actions, got {len(actions)}")
    return [_action(a, f"actions[{i}]") for i, a in enumerate(actions)]


def _action(raw: Any, where: str) -> Action:
    if not isinstance(raw, dict):
        raise _bad(where, "must be an object")
    op = raw.get("op")
    if op not in OPS:
        raise _bad(f"{where}.op", f"must be one of {', '.join(OPS)}, got {op!r}")
    allowed = {"op", "node", "count"} if op == "add" else {"op", "nodes", *({"taint"} if op == "taint" else ())}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise _bad(f"{where}.{extra[0]}", f"unknown field for {op}")
    if op == "add":
        node = _string(raw.get("node"), f"{where}.node")
        count = raw.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise _bad(f"{where}.count", f"must be an integer from 1 to {MAX_COUNT}, got {count!r}")
        return Action(op, where, node=node, count=count)
    action = Action(op, where, nodes=_nodes(raw.get("nodes"), f"{where}.nodes"))
    if op == "taint":
        action.taint = parse_taint(raw.get("taint"), f"{where}.taint")
    return action


def _nodes(value: Any, where: str) -> list[str] | tuple[str, str]:
    if isinstance(value, dict):
        extra = sorted(set(value) - {"label", "value"})
        if extra:
            raise _bad(f"{where}.{extra[0]}", "unknown field (only label and value)")
        label = _string(value.get("label"), f"{where}.label")
        if problem := label_key_problem(label):
            raise _bad(f"{where}.label", f'Invalid value: "{label}": {problem}')
        text = value.get("value")
        if not isinstance(text, str):
            raise _bad(f"{where}.value", "must be a string")
        if problem := label_value_problem(text):
            raise _bad(f"{where}.value", f'Invalid value: "{text}": {problem}')
        return (label, text)
    if not isinstance(value, list) or not value:
        raise _bad(where, 'must be a non-empty list of node names or {"label": ..., "value": ...}')
    if len(value) > MAX_NODES:
        raise _bad(where, f"at most {MAX_NODES} nodes")
    names = [_string(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return list(dict.fromkeys(names))


def parse_taint(value: Any, where: str) -> dict[str, str]:
    """``key[=value]:Effect`` (kubectl taint's syntax), checked as the API server checks a node's taints:
    the key a qualified name, the value a label value, the effect one of NoSchedule|PreferNoSchedule|NoExecute."""
    text = _string(value, where)
    spec, sep, effect = text.rpartition(":")
    if not sep:
        raise _bad(where, f'"{text}": must be key[=value]:effect')
    key, _, val = spec.partition("=")
    if problem := label_key_problem(key):
        raise _bad(where, f'Invalid value: "{key}": {problem}')
    if val and (problem := label_value_problem(val)):
        raise _bad(where, f'Invalid value: "{val}": {problem}')
    if effect not in EFFECTS:
        supported = ", ".join(f'"{e}"' for e in EFFECTS)
        raise _bad(where, f'Unsupported value: "{effect}": supported values: {supported}')
    taint = {"key": key, "effect": effect}
    if val:
        taint["value"] = val
    return taint


def taint_text(taint: dict[str, Any]) -> str:
    """A raw taint as ``key[=value]:effect``, the way selectors.Taint prints one."""
    return str(Taint(taint["key"], taint.get("value") or "", taint["effect"]))


@dataclass
class Applied:
    """The changed state, what each action did (one sentence each), the pods drain evicted, the actions with
    their node sets resolved."""

    state: RawState
    notes: list[str]
    evicted: list[dict[str, Any]]
    actions: list[dict[str, Any]]


def apply(state: RawState, actions: list[Action]) -> Applied:
    """Apply ``actions`` in order to ``state`` and return the new state. Copy on write: ``state``'s dicts are never
    changed (a node or pod an action edits is cloned first, everything else shared), so no deep copy of a 5,000-node
    state is needed (it was a quarter of a what-if). Unknown nodes raise InputError naming the action; then nothing
    of this what-if is used."""
    nodes = list(state.nodes())
    pods = list(state.pods())
    notes: list[str] = []
    evicted: list[dict[str, Any]] = []
    normalized = []
    changed: set[str] = set()
    by_name = {n["metadata"]["name"]: n for n in nodes}  # kept current: only add changes the nodes
    at = {name: i for i, name in enumerate(by_name)}
    owned: set[str] = set()  # nodes cloned already (and the copies add made)

    def own(name: str) -> dict[str, Any]:
        if name not in owned:
            owned.add(name)
            nodes[at[name]] = by_name[name] = clone(by_name[name])
        return by_name[name]

    for action in actions:
        if action.op == "add":
            names = _add(action, by_name, nodes, pods, notes)
            by_name.update((n["metadata"]["name"], n) for n in nodes[len(nodes) - len(names) :])
            at.update((name, len(nodes) - len(names) + k) for k, name in enumerate(names))
            owned.update(names)
            normalized.append(action.normalized())
            continue
        names = _resolve(action, by_name)
        normalized.append(action.normalized(names))
        targets = [own(n) for n in names]
        if action.op in ("cordon", "drain"):
            for node in targets:
                _cordon(node)
            if action.op == "cordon":
                notes.append(f"cordon {_list(names)}")
        elif action.op == "uncordon":
            for node in targets:
                _uncordon(node)
            notes.append(f"uncordon {_list(names)}")
        elif action.op == "taint":
            assert action.taint is not None
            for node in targets:
                taints = node.setdefault("spec", {}).setdefault("taints", [])
                same = [t for t in taints if t.get("key") == action.taint["key"]
                        and t.get("effect") == action.taint["effect"]]  # fmt: skip
                for t in same:  # kubectl taint --overwrite: the same key and effect get the new value
                    taints.remove(t)
                taints.append(dict(action.taint))
            notes.append(f"taint {_list(names)} {taint_text(action.taint)}")
            if action.taint["effect"] == "NoExecute":  # the taint manager evicts the pods that do not tolerate it
                was = pods
                cause = f"taint {taint_text(action.taint)}"
                pods, out = _evict(set(names), pods, _untolerating(action.taint), cause)
                evicted += out
                notes.append(f"taint {_list(names)} {taint_text(action.taint)}: {_evicted_note(out)}")
                gangs = _gang_notes(f"taint {_list(names)}", was, pods, out, state)
                changed.update(gangs)
                notes += gangs.values()
        if action.op == "drain":
            was = pods
            blockers = _drain_blockers(set(names), pods)
            pods, out = _evict(set(names), pods, _not_daemon, "drain")
            evicted += out
            notes.append(f"drain {_list(names)}: {_evicted_note(out)}")
            if blockers:
                notes.append(f"drain {_list(names)}: done as {DRAIN_FLAGS}")
                notes += [f"drain {_list(names)}: kubectl drain would need {b}" for b in blockers]
            gangs = _gang_notes(f"drain {_list(names)}", was, pods, out, state)
            changed.update(gangs)
            notes += gangs.values()
    new = state.replace(nodes, pods)
    if changed:
        new.changed_gangs = state.changed_gangs | changed
    return Applied(new, notes, evicted, normalized)


def gang_of(pod: dict[str, Any]) -> str | None:
    """framework.gang.group_key of a raw Pod: its spec.schedulingGroup's PodGroup, or the scheduler-plugins label."""
    return gang.group_key_of(pod)


def _min_members(state: RawState) -> dict[str, int | None]:
    """namespace/name -> minMember (minCount) of each PodGroup the state knows; None for a basic (no gang) one.
    A PodGroup its parser refuses is left out here (what an odd live object can raise: live/convert.UNUSABLE);
    the run reports it."""
    out: dict[str, int | None] = {}
    for doc in state.pod_groups():
        try:
            group = gang.parse_pod_group(doc, "what-if")
        except (InputError, ValueError, TypeError, KeyError, AttributeError, IndexError, ArithmeticError):
            continue
        out[group.key] = group.min_member if group.gang else None
    return out


def _gang_notes(
    what: str, was: list[dict[str, Any]], now: list[dict[str, Any]], out: list[dict[str, Any]], state: RawState
) -> dict[str, str]:
    """One sentence per gang the drain took members from (gang key -> note). A bare member is deleted, so its
    gang may stay short of minMember: in a cluster nothing refuses that, the others keep running where they are
    bound, and the gang cannot be whole until someone recreates the pods. Recreated members are scheduled again
    as a gang, the bound ones counting toward minMember (RawState.changed_gangs)."""
    gone = {e["pod"] for e in out if not e["recreated"]}
    back = {e["pod"] for e in out if e["recreated"]}
    # The gangs of the evicted pods first: most evictions touch none, and then no pod's gang is looked up.
    evicted = gone | back
    touched = sorted(
        {k for p in was if object_key(p) in evicted and (k := gang_of(p)) is not None and not _finished(p)}
    )
    if not touched:
        return {}
    members: dict[str, list[dict[str, Any]]] = {}
    for pod in was:
        if (key := gang_of(pod)) in touched and not _finished(pod):
            members.setdefault(key, []).append(pod)  # type: ignore[arg-type]
    declared = _min_members(state)
    kept = {object_key(p) for p in now}
    notes = {}
    for key in touched:
        if key in declared and declared[key] is None:
            continue  # a basic PodGroup: its pods are scheduled one by one; drain's own sentence says it all
        pods = members[key]
        deleted = sum(1 for p in pods if object_key(p) in gone)
        recreated = sum(1 for p in pods if object_key(p) in back)
        left = sum(1 for p in pods if object_key(p) in kept)
        bound = sum(1 for p in pods if object_key(p) in kept and object_key(p) not in back
                    and (p.get("spec") or {}).get("nodeName"))  # fmt: skip
        need = declared.get(key)
        kind = "PodGroup" if key in declared else "gang"
        stays = f"{bound} stay{'s' * (bound == 1)} bound" + (f", {recreated} recreated Pending" if recreated else "")
        text = f"{what}: {kind} {key}: {stays}"
        if deleted:
            text = f"{what}: {kind} {key} loses {deleted} of its {len(pods)} members; {stays}"
        short = need is not None and left < need
        if short:
            text += f"; the gang cannot be whole again (minMember {need}) until they are recreated"
        elif deleted and need is not None:
            text += f"; minMember {need} is still met"
        if recreated:
            text += (
                ": the recreated ones wait Pending for the rest"
                if short
                else ": the recreated members are scheduled together, the bound ones counting toward the gang"
            )
        notes[key] = text
    return notes


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _list(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 5 else f"{', '.join(names[:5])} and {len(names) - 5} more"


def _resolve(action: Action, by_name: dict[str, dict[str, Any]]) -> list[str]:
    where = f"{action.field}.nodes"
    if isinstance(action.nodes, tuple):
        label, value = action.nodes
        names = [
            n for n, doc in by_name.items() if ((doc.get("metadata") or {}).get("labels") or {}).get(label) == value
        ]
        if not names:
            raise _bad(where, f"no node has the label {label}={value}")
        return names
    for i, name in enumerate(action.nodes):
        if name not in by_name:
            raise _bad(f"{where}[{i}]", f"no node {name!r} in the state")
    return list(action.nodes)


def _cordon(node: dict[str, Any]) -> None:
    """spec.unschedulable, and the unschedulable taint the node lifecycle controller adds for it when absent."""
    spec = node.setdefault("spec", {})
    spec["unschedulable"] = True
    taints = spec.get("taints")
    if not isinstance(taints, list):
        taints = spec["taints"] = []
    if not any(_is_unschedulable_taint(t) for t in taints):
        taints.append(dict(UNSCHEDULABLE_TAINT))


def _uncordon(node: dict[str, Any]) -> None:
    """No spec.unschedulable, and no unschedulable taint (the controller removes it once the flag is gone)."""
    spec = node.get("spec")
    if not isinstance(spec, dict):
        return
    spec.pop("unschedulable", None)
    taints = spec.get("taints")
    if isinstance(taints, list):
        spec["taints"] = [t for t in taints if not _is_unschedulable_taint(t)]


def _is_unschedulable_taint(taint: Any) -> bool:
    return (
        isinstance(taint, dict)
        and taint.get("key") == UNSCHEDULABLE_TAINT["key"]
        and taint.get("effect") == UNSCHEDULABLE_TAINT["effect"]
    )


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


def _mirror(pod: dict[str, Any]) -> bool:
    """A static pod's mirror: the kubelet owns it (owner kind Node), and only the kubelet removes it."""
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _recreated(pod: dict[str, Any]) -> bool:
    """Whether a controller makes the pod again elsewhere once it is evicted: not a bare pod's, not a DaemonSet's
    (its pod belongs to that node), not a Node's (a static pod's mirror lives and dies with its node)."""
    controller = _controller(pod)
    return controller is not None and controller.get("kind") not in ("DaemonSet", "Node")


def _drain_blockers(names: set[str], pods: list[dict[str, Any]]) -> list[str]:
    """What plain ``kubectl drain`` refuses on these nodes (kubectl/pkg/drain/filters.go), one phrase per flag it
    would need, naming the pods: DaemonSet pods (--ignore-daemonsets), pods with an emptyDir volume
    (--delete-emptydir-data), pods no controller owns (--force). Finished pods and mirror pods block nothing; a
    DaemonSet pod is refused for its DaemonSet alone (kubectl's filters stop at the first that refuses)."""
    daemons, local, bare = [], [], []
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in names or _finished(pod) or _mirror(pod):
            continue
        controller = _controller(pod)
        if controller is not None and controller.get("kind") == "DaemonSet":
            daemons.append(object_key(pod))
            continue
        if any(isinstance(v, dict) and v.get("emptyDir") is not None for v in spec.get("volumes") or []):
            local.append(object_key(pod))
        if controller is None:
            bare.append(object_key(pod))
    out = []
    if bare:
        out.append(f"--force: {_list(bare)} {_verb(bare, 'has', 'have')} no controller")
    if daemons:
        out.append(f"--ignore-daemonsets: {_list(daemons)} {_verb(daemons, 'is', 'are')} managed by a DaemonSet")
    if local:
        out.append(f"--delete-emptydir-data: {_list(local)} {_verb(local, 'uses', 'use')} emptyDir")
    return out


def _verb(items: list[str], one: str, many: str) -> str:
    return one if len(items) == 1 else many


def _not_daemon(pod: dict[str, Any]) -> bool:
    """kubectl drain evicts every pod but those a DaemonSet owns (their controller ignores unschedulable)."""
    controller = _controller(pod)
    return controller is None or controller.get("kind") != "DaemonSet"


def _untolerating(taint: dict[str, str]) -> Any:
    """The taint manager's rule for a NoExecute taint: a pod is evicted unless a toleration tolerates it for good
    (one with tolerationSeconds is evicted when they run out; the what-if shows where that ends)."""
    wanted = Taint(taint["key"], taint.get("value", ""), taint["effect"])

    def evictable(pod: dict[str, Any]) -> bool:
        for t in (pod.get("spec") or {}).get("tolerations") or []:
            toleration = Toleration(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "",
                                    t.get("effect") or "")  # fmt: skip
            if toleration.tolerates(wanted) and t.get("tolerationSeconds") is None:
                return False
        return True

    return evictable


def _evicted_note(out: list[dict[str, Any]]) -> str:
    recreated = sum(1 for e in out if e["recreated"])
    return (
        f"{len(out)} pod{'s' * (len(out) != 1)} evicted, "
        f"{recreated} recreated by {'its controller' if recreated == 1 else 'their controllers'}"
    )


def _evict(
    names: set[str], pods: list[dict[str, Any]], evictable: Any, cause: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Evict the pods bound on the nodes that ``evictable`` picks (finished pods hold nothing and stay; mirror pods
    stay: drain skips them, and the kubelet recreates one the taint manager deletes, on the same node). A pod with
    a controller that recreates it elsewhere (``_recreated``) is recreated Pending (unbound, our bind's annotations
    dropped; under its old name, for the comparison); any other pod is gone. ``cause`` ("drain", "taint K=V:E")
    goes on each entry."""
    kept, evicted = [], []
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in names or _finished(pod) or _mirror(pod) or not evictable(pod):
            kept.append(pod)
            continue
        # A DaemonSet makes no pod on a node with a taint its pod does not tolerate: evicted by a taint, it is gone.
        recreated = _recreated(pod)
        evicted.append({"pod": object_key(pod), "from": spec["nodeName"], "recreated": recreated, "cause": cause})
        if not recreated:
            continue
        pod = clone(pod)  # copy on write: the state's own dict stays as it was
        spec = pod["spec"]
        spec.pop("nodeName", None)
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        for key in _BIND_ANNOTATIONS:
            annotations.pop(key, None)
        status = pod.get("status")
        if isinstance(status, dict):
            for key in ("phase", "conditions", "nominatedNodeName", "hostIP", "podIP", "podIPs", "startTime"):
                status.pop(key, None)
        kept.append(pod)
    return kept, evicted


def _add(
    action: Action,
    by_name: dict[str, dict[str, Any]],
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    notes: list[str],
) -> list[str]:
    """``count`` copies of a node, ``<node>-whatif-<k>``, with no pods but the DaemonSet pods of the original (as
    the DaemonSet controller would run them there; where DaemonSets are documents the loader expands them).

    A new node joins Ready and schedulable: the original's cordon (spec.unschedulable) and the taints its node
    controllers set (``node.kubernetes.io/*``: unschedulable, not-ready, unreachable, ...) are not copied, and the
    notes say so; its own taints (a GPU pool's, a maintenance one an admin set) are."""
    original = by_name.get(action.node)
    if original is None:
        raise _bad(f"{action.field}.node", f"no node {action.node!r} in the state")
    if len(nodes) + action.count > MAX_NODES:
        raise _bad(f"{action.field}.count", f"at most {MAX_NODES} nodes in all, {len(nodes)} already")
    daemons = [
        p
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == action.node
        and any(isinstance(o, dict) and o.get("kind") == "DaemonSet"
                for o in (p.get("metadata") or {}).get("ownerReferences") or [])
    ]  # fmt: skip
    taken = set(by_name)
    pod_keys = {object_key(p) for p in pods}
    names = []
    dropped: dict[str, None] = {}  # what the copies leave out, in order, once each
    k = 0
    for _ in range(action.count):
        k += 1
        while f"{action.node}-whatif-{k}" in taken:
            k += 1
        name = f"{action.node}-whatif-{k}"
        taken.add(name)
        names.append(name)
        node = clone(original)
        meta = node.setdefault("metadata", {})
        meta["name"] = name
        for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
            meta.pop(key, None)
        if HOSTNAME_LABEL in (meta.get("labels") or {}):
            meta["labels"][HOSTNAME_LABEL] = name
        meta["annotations"] = {**(meta.get("annotations") or {}), WHATIF_COPY_ANNOTATION: action.node}
        spec = node.get("spec")
        if isinstance(spec, dict):
            spec.pop("providerID", None)
            if spec.pop("unschedulable", None):
                dropped["spec.unschedulable"] = None
            if isinstance(spec.get("taints"), list):
                kept = []
                for t in spec["taints"]:
                    if isinstance(t, dict) and str(t.get("key") or "").startswith(NODE_TAINT_PREFIX):
                        shown = {"key": t["key"], "value": t.get("value"), "effect": t.get("effect") or ""}
                        dropped[f"taint {taint_text(shown)}"] = None
                    else:
                        kept.append(t)
                spec["taints"] = kept
        nodes.append(node)
        for daemon in daemons:
            pod = _daemon_copy(daemon, action.node, name)
            if object_key(pod) not in pod_keys:
                pod_keys.add(object_key(pod))
                pods.append(pod)
    copies = f"add {action.count} cop{'ies' if action.count != 1 else 'y'} of {action.node}"
    notes.append(f"{copies}: {_list(names)}")
    if dropped:
        notes.append(f"{copies}: the copies join Ready and schedulable, without {action.node}'s {', '.join(dropped)}")
    return names


def _daemon_copy(pod: dict[str, Any], node: str, copy_name: str) -> dict[str, Any]:
    """The DaemonSet pod of ``node`` as the controller would make it for ``copy_name``: pinned there, unplaced
    devices (the copy's admission gives it its own)."""
    out = clone(pod)
    meta = out["metadata"]
    meta["name"] = f"{meta['name']}-{copy_name}"[:253]
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    for key in _BIND_ANNOTATIONS:
        annotations.pop(key, None)
    spec = out["spec"]
    spec["nodeName"] = copy_name
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []  # fmt: skip
    for term in terms:
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name":
                req["values"] = [copy_name if v == node else v for v in req.get("values") or []]
    return out


def compare(
    before: Run,
    after: Run,
    actions: list[Action] | list[dict[str, Any]],
    notes: list[str],
    evicted: list[dict[str, Any]],
    group_by: str | None = None,
    before_view: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The /api/whatif body: who loses their place, who moves, who gets one, and both runs' capacity and
    Pending lists. "Placed before" counts pods bound in the input and pods the run placed.

    ``before_view``: view.build_view of ``before`` when the caller has it (the Hub's current view), so its capacity
    panel and Pending list are not computed again for every what-if."""
    from accelsched.ui import capacity, view

    # today's placements and bound pods are the same for every what-if: computed once (5,000 nodes: some 15 ms)
    if "whatif.today" not in before.cache:
        bound_in_input = {object_key(p) for p in before.state.pods() if (p.get("spec") or {}).get("nodeName")}
        before.cache["whatif.today"] = (before.placements(), bound_in_input)
    was, bound = before.cache["whatif.today"]
    now = after.placements()
    # Pods bound in the input are the cluster's; the others were placed by today's run, a decision not yet made in
    # a cluster. Re-run with the action, such a pod may land elsewhere only because the queue went another way:
    # that is no move the action caused, so it is listed apart ("replaced") and counted nowhere else.
    gone = {e["pod"]: e.get("cause") or "drain" for e in evicted if not e["recreated"]}
    lost, moved, placed, replaced = [], [], [], []
    for key, node in was.items():
        if node is None:
            continue
        if key in gone:
            lost.append({"pod": key, "from": node, "message": _deleted_message(before, key, gone[key])})
            continue
        to = now.get(key)
        if to is None:
            r = after.result(key)
            entry = {"pod": key, "from": node, "message": r.message if r is not None else ""}
            if key not in bound:
                entry["placedByRun"] = True
            lost.append(entry)
        elif to != node:
            (moved if key in bound else replaced).append({"pod": key, "from": node, "to": to})
    for key, node in now.items():
        if node is not None and key in was and was[key] is None:
            placed.append({"pod": key, "to": node})
    # holds the after run's capacity panel and Pending list too; today's node views are reused where unchanged
    reuse = (before, {n["name"]: n for n in before_view["nodes"]}) if before_view else None
    shown = view.build_view(after, group_by, reuse)
    normalized = [a.normalized() if isinstance(a, Action) else a for a in actions]
    return {
        "actions": normalized,
        "notes": notes,
        "lost": lost,
        "moved": moved,
        "placed": placed,
        "replaced": replaced,
        "evicted": evicted,
        "changedNodes": changed_nodes(normalized, lost, moved, placed, evicted, before, shown),
        "before": before_view["capacity"] if before_view else capacity.panel(before.session.cluster, before.results),
        "after": shown["capacity"],
        "pendingBefore": before_view["pending"] if before_view else view.pending_list(before),
        "pendingAfter": shown["pending"],
        "nodes": shown["nodes"],
        "order": shown["order"],
        "readOnly": READ_ONLY,
    }


def changed_nodes(
    actions: list[dict[str, Any]],
    lost: list[dict[str, Any]],
    moved: list[dict[str, Any]],
    placed: list[dict[str, Any]],
    evicted: list[dict[str, Any]],
    before: Run,
    after_view: dict[str, Any],
) -> list[str]:
    """The nodes the action changed, in the after run's order: those it names (and the copies it adds), and those a
    pod left, moved to or got placed on. A node that differs only in where the run put pods Pending in the input
    (``replaced``) is not one."""
    names: set[str] = set()
    for a in actions:
        if isinstance(a.get("nodes"), list):
            names.update(a["nodes"])
    for e in (*lost, *evicted):
        names.add(e["from"])
    for e in moved:
        names.update((e["from"], e["to"]))
    names.update(e["to"] for e in placed)
    today = {n.name for n in before.session.cluster.nodes}
    names.update(n for n in after_view["order"] if n not in today)
    return [n for n in after_view["order"] if n in names]


def _deleted_message(run: Run, key: str, cause: str) -> str:
    """Why an evicted pod is nowhere after: nothing recreates it (a bare pod, a static pod's Node owner), or its
    DaemonSet makes no pod on a node with a NoExecute taint it does not tolerate."""
    cluster = run.session.cluster
    i = cluster.pod_node.get(key)
    pod = cluster.pods_on[i].get(key) if i is not None else None
    if pod is not None and pod.owner_kind == "DaemonSet":
        return f"deleted by {cause}: its DaemonSet makes no pod on a node with a taint it does not tolerate"
    return f"deleted by {cause}: no controller recreates it"
