"""Live mode: the secondary scheduler against a real API server (``accelsched run``) and the read-only what-if
commands on a live cluster's snapshot (``schedule --from-cluster``, ``explain --kubeconfig``)."""
