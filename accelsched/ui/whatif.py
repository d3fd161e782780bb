"""What-if: cordon, drain, taint or add nodes on a copy of the state, re-run the engine, and say what changed.

The actions are those of ``kubectl cordon/uncordon/drain/taint`` and of adding nodes of a type, applied to raw
dicts of a ``RawState.copy()``: nothing reaches the state the page shows, let alone a cluster. A bad body is
refused whole, before anything runs, with an InputError naming the field (``actions[1].taint``), as the API
server names the field of a bad object.

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
from accelsched.topology.allocator import NIC_ANNOTATION, NUMA_ANNOTATION
from accelsched.ui.state import WHATIF_COPY_ANNOTATION, RawState, Run, clone, object_key

OPS = ("cordon", "uncordon", "drain", "taint", "add")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # core/v1 TaintEffect values the API server accepts
MAX_ACTIONS = 100
MAX_COUNT = 1000
MAX_NODES = 10000
HOSTNAME_LABEL = "kubernetes.io/hostname"
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
    value = taint.get("value")
    return f"{taint['key']}={value}:{taint['effect']}" if value else f"{taint['key']}:{taint['effect']}"


@dataclass
class Applied:
    """The changed state, what each action did (one sentence each), the pods drain evicted, the actions with
    their node sets resolved."""

    state: RawState
    notes: list[str]
    evicted: list[dict[str, Any]]
    actions: list[dict[str, Any]]


def apply(state: RawState, actions: list[Action]) -> Applied:
    """Apply ``actions`` in order to ``state`` (a copy: its dicts are changed) and return the new state.
    Unknown nodes raise InputError naming the action; then nothing of this what-if is used."""
    nodes = list(state.nodes())
    pods = list(state.pods())
    notes: list[str] = []
    evicted: list[dict[str, Any]] = []
    normalized = []
    changed: set[str] = set()
    for action in actions:
        by_name = {n["metadata"]["name"]: n for n in nodes}
        if action.op == "add":
            names = _add(action, by_name, nodes, pods, notes)
            normalized.append(action.normalized())
            continue
        names = _resolve(action, by_name)
        normalized.append(action.normalized(names))
        targets = [by_name[n] for n in names]
        if action.op in ("cordon", "drain"):
            for node in targets:
                node.setdefault("spec", {})["unschedulable"] = True
            if action.op == "cordon":
                notes.append(f"cordon {_list(names)}")
        elif action.op == "uncordon":
            for node in targets:
                (node.get("spec") or {}).pop("unschedulable", None)
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
                pods, out = _evict(set(names), pods, _untolerating(action.taint))
                evicted += out
                notes.append(f"taint {_list(names)} {taint_text(action.taint)}: {_evicted_note(out)}")
                gangs = _gang_notes(f"taint {_list(names)}", was, pods, out, state)
                changed.update(gangs)
                notes += gangs.values()
        if action.op == "drain":
            was = pods
            pods, out = _evict(set(names), pods, _not_daemon)
            evicted += out
            notes.append(f"drain {_list(names)}: {_evicted_note(out)}")
            gangs = _gang_notes(f"drain {_list(names)}", was, pods, out, state)
            changed.update(gangs)
            notes += gangs.values()
    new = state.replace(nodes, pods)
    if changed:
        new.changed_gangs = state.changed_gangs | changed
    return Applied(new, notes, evicted, normalized)


def gang_of(pod: dict[str, Any]) -> str | None:
    """framework.gang.group_key of a raw Pod: its spec.schedulingGroup's PodGroup, or the scheduler-plugins label."""
    meta = pod.get("metadata") or {}
    group = (pod.get("spec") or {}).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, dict) else None
    name = name or (meta.get("labels") or {}).get(gang.POD_GROUP_LABEL)
    return f"{meta.get('namespace') or 'default'}/{name}" if isinstance(name, str) and name else None


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
    members: dict[str, list[dict[str, Any]]] = {}
    for pod in was:
        if (key := gang_of(pod)) is not None and not _finished(pod):
            members.setdefault(key, []).append(pod)
    touched = sorted(k for k, ps in members.items() if any(object_key(p) in gone or object_key(p) in back for p in ps))
    if not touched:
        return {}
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


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


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
    names: set[str], pods: list[dict[str, Any]], evictable: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Evict the pods bound on the nodes that ``evictable`` picks (finished pods hold nothing and stay). A pod with
    a controller (but a DaemonSet) is recreated Pending (unbound, our bind's annotations dropped; under its old name,
    for the comparison); a bare pod is gone."""
    kept, evicted = [], []
    for pod in pods:
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        if spec.get("nodeName") not in names or phase in ("Succeeded", "Failed") or not evictable(pod):
            kept.append(pod)
            continue
        controller = _controller(pod)
        # A DaemonSet makes no pod on a node with a taint its pod does not tolerate: evicted by a taint, it is gone.
        recreated = controller is not None and controller.get("kind") != "DaemonSet"
        evicted.append({"pod": object_key(pod), "from": spec["nodeName"], "recreated": recreated})
        if not recreated:
            continue
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
    the DaemonSet controller would run them there; where DaemonSets are documents the loader expands them)."""
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
        (node.get("spec") or {}).pop("providerID", None)
        nodes.append(node)
        for daemon in daemons:
            pod = _daemon_copy(daemon, action.node, name)
            if object_key(pod) not in pod_keys:
                pod_keys.add(object_key(pod))
                pods.append(pod)
    notes.append(f"add {action.count} cop{'ies' if action.count != 1 else 'y'} of {action.node}: {_list(names)}")
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
) -> dict[str, Any]:
    """The /api/whatif body: who loses their place, who moves, who gets one, and both runs' capacity and
    Pending lists. "Placed before" counts pods bound in the input and pods the run placed."""
    from accelsched.ui import capacity, view

    was, now = before.placements(), after.placements()
    gone = {e["pod"] for e in evicted if not e["recreated"]}
    lost, moved, placed = [], [], []
    for key, node in was.items():
        if node is None:
            continue
        if key in gone:
            lost.append({"pod": key, "from": node, "message": "deleted by drain: no controller recreates it"})
            continue
        to = now.get(key)
        if to is None:
            r = after.result(key)
            lost.append({"pod": key, "from": node, "message": r.message if r is not None else ""})
        elif to != node:
            moved.append({"pod": key, "from": node, "to": to})
    for key, node in now.items():
        if node is not None and key in was and was[key] is None:
            placed.append({"pod": key, "to": node})
    shown = view.build_view(after, group_by)
    return {
        "actions": [a.normalized() if isinstance(a, Action) else a for a in actions],
        "notes": notes,
        "lost": lost,
        "moved": moved,
        "placed": placed,
        "evicted": evicted,
        "before": capacity.panel(before.session.cluster, before.results),
        "after": capacity.panel(after.session.cluster, after.results),
        "pendingBefore": view.pending_list(before),
        "pendingAfter": view.pending_list(after),
        "nodes": shown["nodes"],
        "order": shown["order"],
        "readOnly": READ_ONLY,
    }
