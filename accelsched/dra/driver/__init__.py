"""``accelsched dra-driver``: a DRA kubelet plugin (k8s.io/kubelet/pkg/apis/dra/v1) that publishes this node's
ResourceSlices, prepares allocated claims as CDI devices, and checkpoints what it prepared."""
