"""The differential conformance oracle: accelsched against the real kube-scheduler v1.36.3 (docs/conformance.md)."""
