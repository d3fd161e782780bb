// Command etcd is the upstream etcd server at the version k8s.io/kubernetes itself requires, kept a separate
// binary from the API server so a test can kill and restart the API server alone while the data stays in etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
