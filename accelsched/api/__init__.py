"""Kubernetes objects accelsched reads: parsing, quantities, selectors and validation at the edge."""
