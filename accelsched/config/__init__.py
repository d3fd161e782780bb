"""KubeSchedulerConfiguration: strict decoding, validation, and profiles built from the in-tree registry."""

from accelsched.config.load import (
    CONFIG_API_VERSION,
    build_profile,
    default_config,
    kube_scheduler_config,
    load_config,
    parse_config,
)

__all__ = [
    "CONFIG_API_VERSION",
    "build_profile",
    "default_config",
    "kube_scheduler_config",
    "load_config",
    "parse_config",
]
