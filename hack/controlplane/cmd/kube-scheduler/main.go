// Command kube-scheduler is the upstream scheduler, built from the same k8s.io/kubernetes module as the API server:
// the oracle that the conformance harness (hack/conformance, `make conformance`) compares accelsched against.
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
