// Command kube-apiserver is the upstream Kubernetes API server, built from k8s.io/kubernetes as a module so the
// integration tests run against the real thing (admission, RBAC, watch cache, etcd compaction) rather than a mock.
package main

import (
	"os"

	// The upstream binary links these for their side effects: the JSON log format, client-go and version
	// metrics, and the zone database (so the server does not depend on the host's /usr/share/zoneinfo).
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
