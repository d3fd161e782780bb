"""The kubelet's DRA v1 API (``api.proto``) and plugin registration API (``pluginregistration.proto``), with the
stubs generated from them (``make proto``)."""
