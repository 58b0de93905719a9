package schedconfig

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kschedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/apis/config"
)

// Plugin names the renderer writes beyond the table's rows.
const (
	decisionRecordName    = "DecisionRecord"
	instanceIsolationName = "InstanceIsolation"
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
// the user has to change: spec.plugins.… for structured plugins (the args are checked by the
// scheduler's own validation, called with the CR's path), the ConfigMap and the path inside
// the configuration for a raw one.
func Render(ss *berthv1alpha1.SecondaryScheduler, raw []byte) (*Rendered, error) {
	spec := &ss.Spec
	name := spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	var (
		data        []byte
		errPrefixer = func(err error) error { return err }
	)
	switch {
	case spec.Plugins != nil && spec.ConfigMapRef != nil:
		return nil, errors.New("spec: set exactly one of plugins and configMapRef")
	case spec.Plugins != nil:
		doc, err := fromPlugins(name, spec.Plugins)
		if err != nil {
			return nil, err
		}
		doc.LeaderElection = operatorLease(name, ss.Namespace)
		if data, err = marshal(doc); err != nil {
			return nil, err
		}
	case spec.ConfigMapRef != nil:
		key := spec.ConfigMapRef.Key
		if key == "" {
			key = "config.yaml"
		}
		rawSource := fmt.Sprintf("spec.configMapRef: ConfigMap %s/%s key %s", ss.Namespace, spec.ConfigMapRef.Name, key)
		errPrefixer = func(err error) error { return fmt.Errorf("%s: %w", rawSource, err) }
		var err error
		if data, err = fromRaw(raw, operatorLease(name, ss.Namespace)); err != nil {
			return nil, errPrefixer(err)
		}
	default:
		return nil, errors.New("spec: set one of plugins and configMapRef")
	}
	// Typed args were validated at spec.plugins above; a user's raw file is checked whole.
	cfg, err := validate(data, spec.Plugins == nil)
	if err != nil {
		return nil, errPrefixer(err)
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

// The operator owns how the scheduler reaches the API server (in-cluster) and which Lease it
// elects on: its RBAC grants exactly that Lease.
func operatorLease(name, namespace string) *leaderElection {
	return &leaderElection{LeaderElect: true, ResourceLock: "leases", ResourceName: name, ResourceNamespace: namespace}
}

// fromRaw is a user's own configuration with the operator's leader election and without a
// kubeconfig. The document stays generic: it is the user's, with fields Berth does not model.
func fromRaw(raw []byte, le *leaderElection) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil || doc == nil {
		if err == nil {
			err = errors.New("empty document")
		}
		return nil, &NotConfigError{Err: err}
	}
	if doc["apiVersion"] != APIVersion || doc["kind"] != "KubeSchedulerConfiguration" {
		return nil, &NotConfigError{Err: fmt.Errorf("found apiVersion %v, kind %v", doc["apiVersion"], doc["kind"])}
	}
	got, _ := doc["leaderElection"].(map[string]any)
	if got == nil {
		got = map[string]any{}
	}
	got["leaderElect"] = le.LeaderElect
	got["resourceLock"] = le.ResourceLock
	got["resourceName"] = le.ResourceName
	got["resourceNamespace"] = le.ResourceNamespace
	doc["leaderElection"] = got
	if cc, ok := doc["clientConnection"].(map[string]any); ok {
		delete(cc, "kubeconfig")
	}
	return marshal(doc)
}

// document is the part of a KubeSchedulerConfiguration the operator writes; the scheduler's
// loader defaults the rest. Plugin args are the typed args from the CR (api/config/v1).
type document struct {
	APIVersion     string          `json:"apiVersion"`
	Kind           string          `json:"kind"`
	LeaderElection *leaderElection `json:"leaderElection,omitempty"`
	Profiles       []profile       `json:"profiles"`
}

type leaderElection struct {
	LeaderElect       bool   `json:"leaderElect"`
	ResourceLock      string `json:"resourceLock"`
	ResourceName      string `json:"resourceName"`
	ResourceNamespace string `json:"resourceNamespace"`
}

type profile struct {
	SchedulerName string         `json:"schedulerName"`
	Plugins       plugins        `json:"plugins"`
	PluginConfig  []pluginConfig `json:"pluginConfig"`
}

type plugins struct {
	MultiPoint pluginSet  `json:"multiPoint"`
	Filter     *pluginSet `json:"filter,omitempty"`
	Score      *pluginSet `json:"score,omitempty"`
}

type pluginSet struct {
	Enabled  []plugin `json:"enabled,omitempty"`
	Disabled []plugin `json:"disabled,omitempty"`
}

type plugin struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

type pluginConfig struct {
	Name string         `json:"name"`
	Args runtime.Object `json:"args"`
}

// podTopologySpreadName is upstream's PodTopologySpread plugin.
const podTopologySpreadName = "PodTopologySpread"

func names(ns ...string) []plugin {
	out := make([]plugin, len(ns))
	for i, n := range ns {
		out[i] = plugin{Name: n}
	}
	return out
}

// fromPlugins renders one profile with Berth's plugins enabled at every extension point they
// implement (multiPoint), on top of upstream's default plugins, after validating each plugin's
// args with the scheduler's own validation at the CR's path.
func fromPlugins(name string, ps *berthv1alpha1.PluginSet) (*document, error) {
	if errs := validatePluginArgs(field.NewPath("spec", "plugins"), ps); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	var main profile
	add := func(name string, weight *int32, args runtime.Object) {
		main.Plugins.MultiPoint.Enabled = append(main.Plugins.MultiPoint.Enabled, plugin{Name: name, Weight: weight})
		main.PluginConfig = append(main.PluginConfig, pluginConfig{Name: name, Args: args})
	}
	for _, e := range specEntries(ps) {
		if e.plugin.Name != decisionRecordName {
			add(e.plugin.Name, e.weight, e.args)
		}
	}
	// why: recording alone is a legitimate profile (upstream's plugins, explained), but only
	// when asked for; the implicit default does not make an otherwise empty set valid.
	if len(main.PluginConfig) == 0 && !decisionRecordAsked(ps.DecisionRecord) {
		return nil, errors.New("spec.plugins: enable at least one plugin")
	}
	if decisionRecordOn(ps.DecisionRecord) {
		// Default on: every profile rendered here (the isolated one copies this one's plugins
		// and pluginConfig) records, so `kubectl berth explain` works on Helm installs.
		dr, _ := config.Lookup(decisionRecordName)
		args := dr.NewArgs()
		if p := ps.DecisionRecord; p != nil {
			args = &p.DecisionRecordArgs
		}
		add(decisionRecordName, nil, args)
	}
	if ps.NodeImageLocality != nil {
		// NodeImageLocality is ImageLocality on better data; both would count images twice.
		main.Plugins.MultiPoint.Disabled = names("ImageLocality")
	}
	if ps.InstanceIsolation != nil {
		// why: plugins also enabled at a specific extension point run first there, in this
		// order. InstanceIsolation's Filter is one map lookup, so nodes of another class are
		// refused before resource fit, ports, volumes and inter-pod affinity spend time on
		// them; the node-level filters stay ahead of it so a node outside the pod's pool is
		// still reported as such, not as another class's node.
		main.Plugins.Filter = &pluginSet{Enabled: names("NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", instanceIsolationName)}
	}
	if ps.DisableDefaultScore {
		main.Plugins.Score = &pluginSet{Disabled: names("NodeResourcesBalancedAllocation", "NodeResourcesFit")}
		// why: PodTopologySpread's system default constraints (hostname maxSkew 3, zone 5,
		// ScheduleAnyway, for every pod a Service, ReplicaSet or StatefulSet selects) score a
		// node lower for each replica of the pod's workload already on it, at weight 2 against
		// TargetLoadPacking's 1: a scale-up of small replicas then opens one node per replica
		// (the placement bench's growth shape, read from the decision records). List with no
		// constraints drops only those implicit ones; the constraints a pod states still apply.
		main.PluginConfig = append(main.PluginConfig, pluginConfig{Name: podTopologySpreadName,
			Args: &kschedv1.PodTopologySpreadArgs{DefaultingType: kschedv1.ListDefaulting}})
	}
	main.SchedulerName = name
	doc := &document{APIVersion: APIVersion, Kind: "KubeSchedulerConfiguration", Profiles: []profile{main}}
	iso, err := isolatedProfile(main, ps)
	if err != nil {
		return nil, err
	}
	if iso != nil {
		doc.Profiles = append(doc.Profiles, *iso)
	}
	return doc, nil
}

// validatePluginArgs checks every plugin's args in the set with the validation berth-scheduler
// runs, on a defaulted copy (the CR's own args are rendered as written), at the CR's path.
func validatePluginArgs(root *field.Path, ps *berthv1alpha1.PluginSet) field.ErrorList {
	var errs field.ErrorList
	for _, e := range specEntries(ps) {
		if e.plugin.Name == decisionRecordName && !decisionRecordOn(ps.DecisionRecord) {
			continue
		}
		p := root.Child(e.plugin.Field)
		if !e.plugin.InlineArgs {
			p = p.Child("args")
		}
		errs = append(errs, e.plugin.ValidateCopy(p, e.args)...)
	}
	return errs
}

func decisionRecordAsked(p *berthv1alpha1.DecisionRecordPlugin) bool {
	return p != nil && decisionRecordOn(p)
}

func decisionRecordOn(p *berthv1alpha1.DecisionRecordPlugin) bool {
	return p == nil || p.Enabled == nil || *p.Enabled
}

// isolatedProfile is the second profile spec.plugins.instanceIsolation.isolatedProfileName
// asks for: the same plugins and args with InterPodAffinity disabled, for pods whose only
// pod-affinity terms are IPP's class anti-affinity, which InstanceIsolation enforces natively
// (the webhook's "both" mode routes such pods here). nil when not asked for.
func isolatedProfile(main profile, ps *berthv1alpha1.PluginSet) (*profile, error) {
	if ps.InstanceIsolation == nil || ps.InstanceIsolation.IsolatedProfileName == "" {
		return nil, nil
	}
	iso := ps.InstanceIsolation.IsolatedProfileName
	p := field.NewPath("spec", "plugins", "instanceIsolation", "isolatedProfileName")
	if iso == main.SchedulerName {
		return nil, field.Invalid(p, iso, "must differ from spec.schedulerName")
	}
	if iso == "default-scheduler" {
		return nil, field.Invalid(p, iso, "default-scheduler is the cluster's default scheduler")
	}
	out := main
	out.SchedulerName = iso
	out.Plugins.MultiPoint.Disabled = append(append([]plugin{}, main.Plugins.MultiPoint.Disabled...), plugin{Name: "InterPodAffinity"})
	return &out, nil
}

func marshal(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}
