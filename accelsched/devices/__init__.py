"""Accelerator devices: NVIDIA MIG tables and placement, and per-device partitioning of nodes."""
