// Command coredns is the local cluster's DNS server: CoreDNS with only the plugins a cluster's
// Service and pod names need. Why no forward plugin: names outside the cluster get no upstream
// lookup, so no pod of a test run ever queries the machine's real resolver.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order plugins handle a query in (CoreDNS compiles it from plugin.cfg; a build of our own
// sets it).
func init() {
	dnsserver.Directives = []string{"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes"}
}

func main() { coremain.Run() }
