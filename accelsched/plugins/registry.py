"""The in-tree plugin registry and the default profile's plugins, as kube-scheduler keeps NewInTreeRegistry in
plugins/registry.go and the MultiPoint defaults in apis/config/v1/default_plugins.go.

The framework never imports a plugin: whoever builds a scheduler (accelsched.config) hands it this registry, so a
plugin may use the framework (the scheduler handle, statuses) without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelsched.plugins import (
    defaultbinder,
    defaultpreemption,
    deviceallocation,
    devicepartition,
    dynamicresources,
    gpushare,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    noderesourcetopology,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    queuesort,
    schedulinggates,
    tainttoleration,
    volumebinding,
    volumerestrictions,
    volumezone,
)

Factory = Callable[[dict, Any], Any]

REGISTRY: dict[str, Factory] = {
    schedulinggates.NAME: schedulinggates.new,
    queuesort.NAME: queuesort.new,
    nodeunschedulable.NAME: nodeunschedulable.new,
    nodename.NAME: nodename.new,
    tainttoleration.NAME: tainttoleration.new,
    nodeaffinity.NAME: nodeaffinity.new,
    nodeports.NAME: nodeports.new,
    noderesources.FIT_NAME: noderesources.new_fit,
    volumerestrictions.NAME: volumerestrictions.new,
    nodevolumelimits.NAME: nodevolumelimits.new,
    volumebinding.NAME: volumebinding.new,
    volumezone.NAME: volumezone.new,
    noderesourcetopology.NAME: noderesourcetopology.new,
    devicepartition.NAME: devicepartition.new,
    deviceallocation.NAME: deviceallocation.new,
    podtopologyspread.NAME: podtopologyspread.new,
    interpodaffinity.NAME: interpodaffinity.new,
    dynamicresources.NAME: dynamicresources.new,
    defaultpreemption.NAME: defaultpreemption.new,
    noderesources.BALANCED_NAME: noderesources.new_balanced,
    imagelocality.NAME: imagelocality.new,
    defaultbinder.NAME: defaultbinder.new,
}
# The FGD paper's placement policies (FGDScore, BestFitScore, ...): score plugins like any other, off by default.
REGISTRY.update(gpushare.FACTORIES)

# kube-scheduler's MultiPoint defaults in order, with score weights (0: not a score plugin by default).
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    (schedulinggates.NAME, 0),
    (queuesort.NAME, 0),
    (nodeunschedulable.NAME, 0),
    (nodename.NAME, 0),
    (tainttoleration.NAME, 3),
    (nodeaffinity.NAME, 2),
    (nodeports.NAME, 0),
    (noderesources.FIT_NAME, 1),
    (volumerestrictions.NAME, 0),
    (nodevolumelimits.NAME, 0),
    (volumebinding.NAME, 0),  # a score only with StorageCapacityScoring, alpha and off in 1.36
    (volumezone.NAME, 0),
    (noderesourcetopology.NAME, 2),
    (devicepartition.NAME, 1),
    (deviceallocation.NAME, 0),
    (podtopologyspread.NAME, 2),
    (interpodaffinity.NAME, 2),
    (dynamicresources.NAME, 2),  # before DefaultPreemption, as applyDynamicResources puts it
    (defaultpreemption.NAME, 0),
    (noderesources.BALANCED_NAME, 1),
    (imagelocality.NAME, 1),
    (defaultbinder.NAME, 0),
)


# Plugins without an args type in kube-scheduler or in accelsched: a pluginConfig for them must carry no args.
NO_ARGS = frozenset({queuesort.NAME, nodeunschedulable.NAME, nodename.NAME, defaultbinder.NAME})
NO_ARGS |= {schedulinggates.NAME, nodeports.NAME, imagelocality.NAME}
# NodeAffinityArgs.addedAffinity exists in kube-scheduler but accelsched does not apply it: refused, not ignored.
UNSUPPORTED_ARGS = {nodeaffinity.NAME: "addedAffinity"}


def in_tree_registry() -> dict[str, Factory]:
    """A copy of the registry, for a caller that adds out-of-tree plugins of its own."""
    return dict(REGISTRY)
