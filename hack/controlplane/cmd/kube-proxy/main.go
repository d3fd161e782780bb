// Command kube-proxy is the upstream kube-proxy, built from the same k8s.io/kubernetes module as the API server. The
// chart's real-node test (tests/node/test_chart_node.py) runs it in iptables mode on the host, so the chart's pods
// reach the API server through the `kubernetes` Service's ClusterIP, as pods in a cluster do.
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
