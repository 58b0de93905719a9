package schedconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/decisionrecord"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/imagelocality"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/instanceisolation"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/loadvariationriskbalancing"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/targetloadpacking"
)

// DefaultSchedulerName is the profile name when spec.schedulerName is empty.
const DefaultSchedulerName = "berth-scheduler"

// Rendered is a validated configuration ready for the scheduler's ConfigMap.
type Rendered struct {
	YAML []byte
	Hash string
}

// Render builds the KubeSchedulerConfiguration a SecondaryScheduler asks for and validates it
// (Validate). raw is the ConfigMap content when spec.configMapRef is set. Errors name the field
// the user has to change: spec.plugins.… for structured plugins, the ConfigMap and the path
// inside the configuration for a raw one.
func Render(ss *berthv1alpha1.SecondaryScheduler, raw []byte) (*Rendered, error) {
	spec := &ss.Spec
	name := spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	var (
		doc         map[string]any
		argsFields  []string // CR field of each rendered pluginConfig entry, by index
		rawSource   string
		errPrefixer = func(err error) error { return err }
	)
	switch {
	case spec.Plugins != nil && spec.ConfigMapRef != nil:
		return nil, errors.New("spec: set exactly one of plugins and configMapRef")
	case spec.Plugins != nil:
		var err error
		doc, argsFields, err = fromPlugins(name, spec.Plugins)
		if err != nil {
			return nil, err
		}
	case spec.ConfigMapRef != nil:
		key := spec.ConfigMapRef.Key
		if key == "" {
			key = "config.yaml"
		}
		rawSource = fmt.Sprintf("spec.configMapRef: ConfigMap %s/%s key %s", ss.Namespace, spec.ConfigMapRef.Name, key)
		errPrefixer = func(err error) error { return fmt.Errorf("%s: %w", rawSource, err) }
		if err := yaml.Unmarshal(raw, &doc); err != nil || doc == nil {
			if err == nil {
				err = errors.New("empty document")
			}
			return nil, errPrefixer(&NotConfigError{Err: err})
		}
		if doc["apiVersion"] != APIVersion || doc["kind"] != "KubeSchedulerConfiguration" {
			return nil, errPrefixer(&NotConfigError{Err: fmt.Errorf("found apiVersion %v, kind %v", doc["apiVersion"], doc["kind"])})
		}
	default:
		return nil, errors.New("spec: set one of plugins and configMapRef")
	}

	// The operator owns how the scheduler reaches the API server (in-cluster) and which Lease
	// it elects on: its RBAC grants exactly that Lease.
	le, _ := doc["leaderElection"].(map[string]any)
	if le == nil {
		le = map[string]any{}
	}
	le["leaderElect"] = true
	le["resourceLock"] = "leases"
	le["resourceName"] = name
	le["resourceNamespace"] = ss.Namespace
	doc["leaderElection"] = le
	if cc, ok := doc["clientConnection"].(map[string]any); ok {
		delete(cc, "kubeconfig")
	}

	data, err := marshal(doc)
	if err != nil {
		return nil, errPrefixer(err)
	}
	cfg, err := Validate(data)
	if err != nil {
		return nil, errPrefixer(mapArgsErrors(err, argsFields))
	}
	found := false
	for _, p := range cfg.Profiles {
		found = found || p.SchedulerName == name
	}
	if !found {
		return nil, errPrefixer(fmt.Errorf("profiles: no profile has schedulerName %q (spec.schedulerName)", name))
	}
	return &Rendered{YAML: data, Hash: Hash(data)}, nil
}

// mapArgsErrors replaces profiles[0].pluginConfig[i].args with the CR field that produced it.
func mapArgsErrors(err error, argsFields []string) error {
	if len(argsFields) == 0 {
		return err
	}
	var out []error
	seen := map[string]bool{}
	for _, e := range unjoin(err) {
		var ae *ArgsError
		if errors.As(e, &ae) {
			for i, f := range argsFields {
				// why: the isolated profile (profiles[1]) repeats profile 0's pluginConfig,
				// so its args errors name the same CR field; report each once.
				for _, prof := range []int{0, 1} {
					if ae.Path == fmt.Sprintf("profiles[%d].pluginConfig[%d].args", prof, i) {
						e = fmt.Errorf("%s: %w", f, ae.Err)
					}
				}
			}
		}
		if seen[e.Error()] {
			continue
		}
		seen[e.Error()] = true
		out = append(out, e)
	}
	return errors.Join(out...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// fromPlugins renders one profile with Berth's plugins enabled at every extension point they
// implement (multiPoint), on top of upstream's default plugins.
func fromPlugins(name string, ps *berthv1alpha1.PluginSet) (map[string]any, []string, error) {
	var (
		enabled      []any
		pluginConfig []any
		fields       []string
	)
	add := func(plugin, crField string, weight *int32, args any, fix func(map[string]any) error) error {
		e := map[string]any{"name": plugin}
		if weight != nil {
			e["weight"] = *weight
		}
		enabled = append(enabled, e)
		j, err := json.Marshal(args)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return err
		}
		if fix != nil {
			if err := fix(m); err != nil {
				return fmt.Errorf("%s.%w", crField, err)
			}
		}
		pluginConfig = append(pluginConfig, map[string]any{"name": plugin, "args": m})
		fields = append(fields, crField)
		return nil
	}
	if p := ps.TargetLoadPacking; p != nil {
		if err := add(targetloadpacking.Name, "spec.plugins.targetLoadPacking.args", p.Weight.Weight, p.Args, nil); err != nil {
			return nil, nil, err
		}
	}
	if p := ps.LoadVariationRiskBalancing; p != nil {
		// The CRD carries the variance knobs as decimal strings; the plugin takes numbers.
		toFloat := func(m map[string]any) error {
			for _, k := range []string{"safeVarianceMargin", "safeVarianceSensitivity"} {
				s, ok := m[k].(string)
				if !ok {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil {
					return fmt.Errorf("%s: invalid value %q: must be a decimal number", k, s)
				}
				m[k] = f
			}
			return nil
		}
		if err := add(loadvariationriskbalancing.Name, "spec.plugins.loadVariationRiskBalancing.args", p.Weight.Weight, p.Args, toFloat); err != nil {
			return nil, nil, err
		}
	}
	if p := ps.SySched; p != nil {
		if err := add(sysched.Name, "spec.plugins.sySched.args", p.Weight.Weight, p.Args, nil); err != nil {
			return nil, nil, err
		}
	}
	if p := ps.NodeImageLocality; p != nil {
		if err := add(imagelocality.Name, "spec.plugins.nodeImageLocality.args", p.Weight.Weight, p.Args, nil); err != nil {
			return nil, nil, err
		}
	}
	if p := ps.InstanceIsolation; p != nil {
		if err := add(instanceisolation.Name, "spec.plugins.instanceIsolation.args", p.Weight.Weight, p.Args, nil); err != nil {
			return nil, nil, err
		}
	}
	// why: recording alone is a legitimate profile (upstream's plugins, explained), but only
	// when asked for; the implicit default does not make an otherwise empty set valid.
	if len(enabled) == 0 && (ps.DecisionRecord == nil || !decisionRecordOn(ps.DecisionRecord)) {
		return nil, nil, errors.New("spec.plugins: enable at least one plugin")
	}
	if p := ps.DecisionRecord; p == nil || decisionRecordOn(p) {
		// Default on: every profile rendered here (the isolated one copies this one's plugins
		// and pluginConfig) records, so `kubectl berth explain` works on Helm installs.
		var args decisionRecordArgs
		if p != nil {
			args = decisionRecordArgs{Records: p.Records, TopNodes: p.TopNodes, Summary: p.Summary}
		}
		if err := add(decisionrecord.Name, "spec.plugins.decisionRecord", nil, args, nil); err != nil {
			return nil, nil, err
		}
	}
	multiPoint := map[string]any{"enabled": enabled}
	if ps.NodeImageLocality != nil {
		// NodeImageLocality is ImageLocality on better data; both would count images twice.
		multiPoint["disabled"] = []any{map[string]any{"name": "ImageLocality"}}
	}
	plugins := map[string]any{"multiPoint": multiPoint}
	if ps.InstanceIsolation != nil {
		// why: plugins also enabled at a specific extension point run first there, in this
		// order. InstanceIsolation's Filter is one map lookup, so nodes of another class are
		// refused before resource fit, ports, volumes and inter-pod affinity spend time on
		// them; the node-level filters stay ahead of it so a node outside the pod's pool is
		// still reported as such, not as another class's node.
		var filter []any
		for _, n := range []string{"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", instanceisolation.Name} {
			filter = append(filter, map[string]any{"name": n})
		}
		plugins["filter"] = map[string]any{"enabled": filter}
	}
	if ps.DisableDefaultScore {
		plugins["score"] = map[string]any{"disabled": []any{
			map[string]any{"name": "NodeResourcesBalancedAllocation"},
			map[string]any{"name": "NodeResourcesFit"},
		}}
	}
	profiles := []any{map[string]any{
		"schedulerName": name,
		"plugins":       plugins,
		"pluginConfig":  pluginConfig,
	}}
	if iso, err := isolatedProfile(name, ps, plugins, pluginConfig); err != nil {
		return nil, nil, err
	} else if iso != nil {
		profiles = append(profiles, iso)
	}
	doc := map[string]any{
		"apiVersion": APIVersion,
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   profiles,
	}
	return doc, fields, nil
}

// decisionRecordArgs are DecisionRecord's args as the plugin reads them (the CR's enabled is
// not one of them: its strict decoder would refuse it).
type decisionRecordArgs struct {
	Records  *int32 `json:"records,omitempty"`
	TopNodes *int32 `json:"topNodes,omitempty"`
	Summary  string `json:"summary,omitempty"`
}

func decisionRecordOn(p *berthv1alpha1.DecisionRecordPlugin) bool {
	return p.Enabled == nil || *p.Enabled
}

// isolatedProfile is the second profile spec.plugins.instanceIsolation.isolatedProfileName
// asks for: the same plugins and args with InterPodAffinity disabled, for pods whose only
// pod-affinity terms are IPP's class anti-affinity, which InstanceIsolation enforces natively
// (the webhook's "both" mode routes such pods here). nil when not asked for.
func isolatedProfile(main string, ps *berthv1alpha1.PluginSet, plugins map[string]any, pluginConfig []any) (map[string]any, error) {
	if ps.InstanceIsolation == nil || ps.InstanceIsolation.IsolatedProfileName == "" {
		return nil, nil
	}
	iso := ps.InstanceIsolation.IsolatedProfileName
	if iso == main {
		return nil, fmt.Errorf("spec.plugins.instanceIsolation.isolatedProfileName: Invalid value: %q: must differ from spec.schedulerName", iso)
	}
	if iso == "default-scheduler" {
		return nil, fmt.Errorf("spec.plugins.instanceIsolation.isolatedProfileName: Invalid value: %q: default-scheduler is the cluster's default scheduler", iso)
	}
	mp, _ := plugins["multiPoint"].(map[string]any)
	isoMP := map[string]any{"enabled": mp["enabled"]}
	disabled := []any{map[string]any{"name": "InterPodAffinity"}}
	if d, ok := mp["disabled"].([]any); ok {
		disabled = append(append([]any{}, d...), disabled...)
	}
	isoMP["disabled"] = disabled
	isoPlugins := map[string]any{"multiPoint": isoMP}
	for k, v := range plugins {
		if k != "multiPoint" {
			isoPlugins[k] = v
		}
	}
	return map[string]any{
		"schedulerName": iso,
		"plugins":       isoPlugins,
		"pluginConfig":  pluginConfig,
	}, nil
}
