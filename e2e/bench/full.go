package bench

import (
	"context"
	"strings"

	"github.com/berth-sched/berth/e2e/bench/exs"
	"github.com/berth-sched/berth/e2e/cluster"
)

func init() {
	RegisterProfile(FullBerthProfile)
	RegisterProfile(FullBerthNoDefaultScoreProfile)
	RegisterProfile(FloorProfile)
}

// FloorBinary is berth-scheduler built with three no-op Score plugins (make bench builds it).
const FloorBinary = "berth-scheduler-floor"

// FloorProfile is the default plugins plus three Score plugins that return 0 at once: what the
// framework alone charges for the three Score plugins the full profile adds (per node and
// plugin: the call, its instrumentation, the score's bookkeeping and weighting). No work a
// plugin does can take the full profile above this profile's throughput.
func FloorProfile() Profile {
	return Profile{
		Name:   "berth-scheduler (default plugins + 3 no-op Score plugins)",
		Binary: FloorBinary,
		Profiles: "- schedulerName: " + SchedulerName + "\n  plugins:\n    multiPoint:\n      enabled:\n" +
			"      - name: BenchFloorScore1\n      - name: BenchFloorScore2\n      - name: BenchFloorScore3\n",
	}
}

// FullBerthName names the full Berth profile in tables.
const FullBerthName = "berth-scheduler (full: TargetLoadPacking + LoadVariationRiskBalancing + SySched)"

// FullBerthProfile is berth-scheduler with the default plugins plus everything Berth scores
// with: TargetLoadPacking and LoadVariationRiskBalancing on the synthetic load watcher (see
// LoadAwareProfile) and SySched on the synthetic seccomp profiles (pods spread over them as in
// the SySched profile).
func FullBerthProfile() Profile {
	p, addr, _ := syntheticLoadProfile()
	return fullBerthProfile(addr, p.Setup)
}

// FullBerthNoDefaultScoreProfile is the full profile as SecondaryScheduler
// spec.plugins.disableDefaultScore renders it (upstream's TargetLoadPacking example): the
// spreading NodeResourcesFit and NodeResourcesBalancedAllocation scores are off, so three
// Berth Score plugins replace two upstream ones instead of adding to them.
func FullBerthNoDefaultScoreProfile() Profile {
	p, addr, _ := syntheticLoadProfile()
	f := fullBerthProfile(addr, p.Setup, "      disabled:\n      - name: NodeResourcesBalancedAllocation\n      - name: NodeResourcesFit\n")
	f.Name = "berth-scheduler (full, disableDefaultScore)"
	return f
}

// fullBerthProfile is the full profile reading the load watcher at addr; loadSetup (optional)
// starts whatever serves it; score (optional) adds entries under plugins.score.
func fullBerthProfile(addr string, loadSetup func(context.Context, *cluster.Cluster) error, score ...string) Profile {
	return Profile{
		Name:   FullBerthName,
		Binary: cluster.BerthScheduler,
		Profiles: "- schedulerName: " + SchedulerName + "\n" + loadAwarePlugins(addr,
			"    preScore:\n      enabled:\n      - name: SySched\n    score:\n      enabled:\n      - name: SySched\n"+strings.Join(score, "")+
				"    reserve:\n      enabled:\n      - name: SySched\n",
			"  - name: SySched\n    args:\n      defaultProfileNamespace: default\n      defaultProfileName: "+exs.FullProfile+"\n"),
		Setup: func(ctx context.Context, c *cluster.Cluster) error {
			if loadSetup != nil {
				if err := loadSetup(ctx, c); err != nil {
					return err
				}
			}
			return syschedSetup(ctx, c)
		},
		PodMutator: syschedPodMutator,
	}
}
