// Command kubelet is the upstream node agent, built from the same k8s.io/kubernetes module as the API server: the
// real kubelet that tests/node/ runs against containerd, so the device plugin and the Topology Manager prediction
// are checked against the kubelet itself rather than our own peer (hack/build-node.sh, `make node`).
package main

import (
	"context"
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
