package podconfig

import (
	"flag"
	"fmt"

	"github.com/berth-sched/berth/pkg/flagvalue"
)

// BindPolicyFlags registers the policy flags on fs, the same for the operator and the node
// agent (the chart passes both the same podConfig values, so each re-checks what the other
// decided), and returns a function that parses and checks them after fs.Parse.
func BindPolicyFlags(fs *flag.FlagSet) func() (Policy, error) {
	prefix := fs.String("podconfig-bridge-prefix", DefaultBridgePrefix, "prefix every PodNetwork bridge must start with")
	parents := fs.String("podconfig-allowed-parents", "", "comma-separated host interfaces whose VLANs and VXLANs PodNetworks may use; empty: none")
	cidrs := fs.String("podconfig-cluster-cidrs", "",
		"comma-separated pod and service CIDRs of the cluster: PodNetworks overlapping them are refused (the operator also discovers ServiceCIDRs and node podCIDRs)")
	nodeNets := fs.String("podconfig-node-networks", "",
		"comma-separated networks the nodes live on: PodNetworks overlapping them are refused (each agent also refuses its node's own interface ranges)")
	return func() (Policy, error) {
		p := Policy{BridgePrefix: *prefix, AllowedParents: flagvalue.SplitList(*parents)}
		var err error
		if p.ClusterCIDRs, err = ParseCIDRs(flagvalue.SplitList(*cidrs)); err != nil {
			return p, fmt.Errorf("--podconfig-cluster-cidrs: %w", err)
		}
		if p.NodeNetworks, err = ParseCIDRs(flagvalue.SplitList(*nodeNets)); err != nil {
			return p, fmt.Errorf("--podconfig-node-networks: %w", err)
		}
		return p, p.Check()
	}
}
