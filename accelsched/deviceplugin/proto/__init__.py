"""The kubelet device plugin API v1beta1: ``api.proto`` and the stubs generated from it (``make proto``)."""
