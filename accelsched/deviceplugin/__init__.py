"""A kubelet device plugin (v1beta1 gRPC over unix sockets) advertising accelerators, slices and their topology."""
