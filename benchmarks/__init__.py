"""scheduler_perf-like throughput benchmarks for accelsched.

``python -m benchmarks`` builds clusters and pods shaped like the workloads of kubernetes'
test/integration/scheduler_perf (performance-config.yaml), runs each workload in its own subprocess, and
prints the scheduling throughput next to kube-scheduler's published threshold. Only ``Scheduler.run`` over
the measured pods is timed; building the objects and scheduling the init pods are not.
"""
