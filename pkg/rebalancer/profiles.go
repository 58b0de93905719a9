package rebalancer

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
	"github.com/berth-sched/berth/pkg/operator"
	berthconfig "github.com/berth-sched/berth/pkg/scheduler/apis/config"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Isolation is what InstanceIsolation does in one scheduler profile: Off when the profile does
// not run its Filter, else the profile's own args (class labels, strict, spread, exemptions).
type Isolation struct {
	Off  bool
	Args *classrule.Args
}

// ProfileIsolation reads, for every profile of a scheduler configuration, whether it runs
// InstanceIsolation's Filter and with which args: the verdict a moved pod meets is the one
// its own profile will give, not the plugin's defaults.
func ProfileIsolation(cfg *config.KubeSchedulerConfiguration) (map[string]Isolation, error) {
	out := map[string]Isolation{}
	for i := range cfg.Profiles {
		prof := &cfg.Profiles[i]
		if !filterEnabled(prof.Plugins, classrule.PluginName) {
			out[prof.SchedulerName] = Isolation{Off: true}
			continue
		}
		args, err := parseIsolationArgs(configArgs(prof, classrule.PluginName))
		if err != nil {
			return nil, fmt.Errorf("profile %s: %s args: %w", prof.SchedulerName, classrule.PluginName, err)
		}
		out[prof.SchedulerName] = Isolation{Args: args}
	}
	return out, nil
}

// parseIsolationArgs decodes, defaults and validates InstanceIsolation's args exactly as the
// plugin's factory does (obj nil: the defaults), through the plugin table's package, which
// imports no plugin.
func parseIsolationArgs(obj runtime.Object) (*classrule.Args, error) {
	return berthconfig.Parse(obj, classrule.PluginName, berthconfig.ValidateInstanceIsolationArgs)
}

// filterEnabled follows the scheduler's own merge: a plugin runs at Filter when MultiPoint or
// Filter enables it and Filter does not disable it (by name or "*").
func filterEnabled(ps *config.Plugins, name string) bool {
	if ps == nil {
		return false
	}
	has := func(list []config.Plugin, n string) bool {
		return slices.ContainsFunc(list, func(p config.Plugin) bool { return p.Name == n })
	}
	if has(ps.Filter.Disabled, name) || has(ps.Filter.Disabled, "*") {
		return has(ps.Filter.Enabled, name)
	}
	return has(ps.Filter.Enabled, name) || (has(ps.MultiPoint.Enabled, name) && !has(ps.MultiPoint.Disabled, name))
}

// configArgs is the profile's args for the plugin, nil (the defaults) when it has none.
func configArgs(prof *config.KubeSchedulerProfile, name string) runtime.Object {
	for _, pc := range prof.PluginConfig {
		if pc.Name == name {
			return pc.Args
		}
	}
	return nil
}

// readProfiles reads the configuration the operator rendered for every SecondaryScheduler (its
// ConfigMap) and returns each profile's isolation. A scheduler whose configuration cannot be
// read is named in problems and left out: its pods meet the plugin's default args, the
// stricter reading for a pod that carries a class.
func readProfiles(ctx context.Context, c client.Reader) (map[string]Isolation, []string, error) {
	var list berthv1alpha1.SecondarySchedulerList
	if err := c.List(ctx, &list); err != nil {
		return nil, nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	out := map[string]Isolation{}
	var problems []string
	for i := range list.Items {
		ss := &list.Items[i]
		var cm corev1.ConfigMap
		key := types.NamespacedName{Namespace: ss.Namespace, Name: operator.ConfigMapName(ss)}
		if err := c.Get(ctx, key, &cm); err != nil {
			problems = append(problems, fmt.Sprintf("SecondaryScheduler %s/%s: %v", ss.Namespace, ss.Name, err))
			continue
		}
		cfg, err := schedconfig.Load([]byte(cm.Data[operator.ConfigKey]))
		if err == nil {
			var profs map[string]Isolation
			if profs, err = ProfileIsolation(cfg); err == nil {
				for name, iso := range profs {
					// A name two SecondarySchedulers claim: the older one's reading.
					if _, taken := out[name]; !taken {
						out[name] = iso
					}
				}
				continue
			}
		}
		problems = append(problems, fmt.Sprintf("SecondaryScheduler %s/%s: ConfigMap %s: %v", ss.Namespace, ss.Name, key, err))
	}
	return out, problems, nil
}
