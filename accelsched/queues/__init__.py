"""Queues and quotas: Kueue's API (kueue.x-k8s.io/v1beta2) and its admission, apart from placement.

As Kueue keeps its scheduler (pkg/scheduler) apart from its cache (pkg/cache): ``api`` reads and validates the
objects, ``workloads`` finds the workloads (Workload objects, and pods, Jobs and pod groups with a queue label),
``quota`` is the cohort tree with its usage, ``flavorassigner`` picks flavors, ``admission`` runs Kueue's
scheduling cycle over the queues, and ``report`` words the result. The engine places the pods of admitted
workloads afterwards; it is never called from here. docs/queues.md says what is covered.
"""
