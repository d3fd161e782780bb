// Command kube-controller-manager is the upstream controller manager, built from the same k8s.io/kubernetes module
// as the API server. The DRA integration tests (tests/live/test_live_dra.py) run it with only the resourceclaim
// controller, which makes a pod's ResourceClaims from its ResourceClaimTemplates, writes
// pod.status.resourceClaimStatuses and clears reservedFor entries of pods that are gone (hack/build-controller-manager.sh).
package main

import (
	"os"
	_ "time/tzdata" // for CronJob Time Zone support, as upstream's main

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
