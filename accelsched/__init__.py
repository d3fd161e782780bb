"""accelsched: a kube-scheduler-faithful scheduler for accelerator workloads, with device-level allocation."""

__version__ = "0.1.0"
