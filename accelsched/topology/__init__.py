"""Node topology: NUMA nodes and PCIe placement of accelerators and NICs, discovered from sysfs."""

from accelsched.topology.model import (
    LINK_LEGEND,
    PAIR_SCORES,
    NodeTopology,
    NumaNode,
    PciDevice,
    link_class,
    pair_score,
    pcie_link,
)
from accelsched.topology.sysfs import discover

__all__ = [
    "LINK_LEGEND",
    "PAIR_SCORES",
    "NodeTopology",
    "NumaNode",
    "PciDevice",
    "discover",
    "link_class",
    "pair_score",
    "pcie_link",
]
