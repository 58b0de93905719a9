// Package loadaware holds what TargetLoadPacking and LoadVariationRiskBalancing share: the
// arguments both accept, the background-refreshed load watcher snapshot, the accounting of pods
// placed since that snapshot, and the optional usage-threshold filter.
package loadaware

import (
	"fmt"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// MetricProviderType names an upstream library-mode metrics source. Berth always reads a load
// watcher service; the field is accepted so that upstream configurations decode unchanged.
type MetricProviderType string

// Provider names accepted by upstream scheduler-plugins.
const (
	KubernetesMetricsServer MetricProviderType = "KubernetesMetricsServer"
	Prometheus              MetricProviderType = "Prometheus"
	SignalFx                MetricProviderType = "SignalFx"
)

// MetricProviderSpec mirrors upstream's metricProvider block.
type MetricProviderSpec struct {
	Type               MetricProviderType `json:"type,omitempty"`
	Address            string             `json:"address,omitempty"`
	Token              string             `json:"token,omitempty"`
	InsecureSkipVerify *bool              `json:"insecureSkipVerify,omitempty"`
}

// ExpiredMetricsAction says what a node whose metrics are missing, stale or expired gets.
type ExpiredMetricsAction string

const (
	// ExpiredMetricsNeutral scores such a node with NeutralScore and never filters it out.
	ExpiredMetricsNeutral ExpiredMetricsAction = "Neutral"
	// ExpiredMetricsBlock makes Filter reject such a node, as long as the load watcher itself
	// is answering with fresh data for other nodes (see README).
	ExpiredMetricsBlock ExpiredMetricsAction = "Block"
)

// Defaults of Berth's own arguments.
const (
	DefaultMetricsExpirySeconds    int64 = 300
	DefaultRefreshIntervalSeconds  int64 = 30
	DefaultWatcherTimeoutSeconds   int64 = 10
	DefaultAssumedPodExpirySeconds int64 = 300
	DefaultNeutralScore            int64 = 50
)

// CommonArgs are the arguments both plugins take. Embedded without a JSON tag in each plugin's
// args so its fields sit at the top level, like upstream's inlined TrimaranSpec.
type CommonArgs struct {
	// WatcherAddress is the base URL of the load watcher, e.g. http://berth-loadwatcher:2020.
	WatcherAddress string `json:"watcherAddress,omitempty"`
	// MetricProvider is upstream's library-mode provider; accepted, validated, not used.
	MetricProvider MetricProviderSpec `json:"metricProvider,omitempty"`

	// MetricsExpirySeconds: metrics older than this are treated as missing.
	MetricsExpirySeconds *int64 `json:"metricsExpirySeconds,omitempty"`
	// ExpiredMetricsAction: Neutral (default) or Block.
	ExpiredMetricsAction ExpiredMetricsAction `json:"expiredMetricsAction,omitempty"`
	// NeutralScore is the score of a node whose load is unknown (0..100, default 50).
	NeutralScore *int64 `json:"neutralScore,omitempty"`
	// RefreshIntervalSeconds is how often the snapshot is fetched from the watcher.
	RefreshIntervalSeconds *int64 `json:"refreshIntervalSeconds,omitempty"`
	// WatcherTimeoutSeconds bounds one fetch (connect + headers + body).
	WatcherTimeoutSeconds *int64 `json:"watcherTimeoutSeconds,omitempty"`
	// AssumedPodExpirySeconds bounds how long a placed pod is added to its node's load while
	// the agent has not reported it.
	AssumedPodExpirySeconds *int64 `json:"assumedPodExpirySeconds,omitempty"`
	// UsageThresholds turns on the Filter: resource (cpu, memory) → maximum usage percent.
	// Empty (default) = the usage filter is off.
	UsageThresholds map[v1.ResourceName]int64 `json:"usageThresholds,omitempty"`
}

func defaultInt(p **int64, v int64) {
	if *p == nil {
		*p = &v
	}
}

// SetDefaults fills unset fields. Explicit values are kept even when invalid, so that
// Validate can name them instead of silently replacing them (upstream replaces them).
func (a *CommonArgs) SetDefaults() {
	a.WatcherAddress = strings.TrimRight(strings.TrimSpace(a.WatcherAddress), "/")
	defaultInt(&a.MetricsExpirySeconds, DefaultMetricsExpirySeconds)
	defaultInt(&a.RefreshIntervalSeconds, DefaultRefreshIntervalSeconds)
	defaultInt(&a.WatcherTimeoutSeconds, DefaultWatcherTimeoutSeconds)
	defaultInt(&a.AssumedPodExpirySeconds, DefaultAssumedPodExpirySeconds)
	defaultInt(&a.NeutralScore, DefaultNeutralScore)
	if a.ExpiredMetricsAction == "" {
		a.ExpiredMetricsAction = ExpiredMetricsNeutral
	}
}

// Validate checks defaulted CommonArgs. Paths are relative to the plugin args root.
func (a *CommonArgs) Validate(root *field.Path) field.ErrorList {
	var errs field.ErrorList
	p := root.Child("watcherAddress")
	if a.WatcherAddress == "" {
		errs = append(errs, field.Required(p, "berth-scheduler reads a load watcher service (library mode via metricProvider is not supported); set it to the load watcher URL, e.g. http://berth-loadwatcher.berth-system:2020"))
	} else if u, err := url.Parse(a.WatcherAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, field.Invalid(p, a.WatcherAddress, "must be an absolute http:// or https:// URL with a host"))
	} else if u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, field.Invalid(p, a.WatcherAddress, "must not carry a query or fragment; /watcher?pods=true is appended"))
	}
	switch a.MetricProvider.Type {
	case "", KubernetesMetricsServer, Prometheus, SignalFx:
	default:
		errs = append(errs, field.NotSupported(root.Child("metricProvider", "type"), a.MetricProvider.Type,
			[]string{string(KubernetesMetricsServer), string(Prometheus), string(SignalFx)}))
	}
	positive := func(name string, v *int64, max int64) {
		if *v < 1 || *v > max {
			errs = append(errs, field.Invalid(root.Child(name), *v, fmt.Sprintf("must be between 1 and %d", max)))
		}
	}
	const day = 86400
	positive("metricsExpirySeconds", a.MetricsExpirySeconds, day)
	positive("refreshIntervalSeconds", a.RefreshIntervalSeconds, 3600)
	positive("watcherTimeoutSeconds", a.WatcherTimeoutSeconds, 600)
	positive("assumedPodExpirySeconds", a.AssumedPodExpirySeconds, day)
	if *a.NeutralScore < 0 || *a.NeutralScore > 100 {
		errs = append(errs, field.Invalid(root.Child("neutralScore"), *a.NeutralScore, "must be between 0 and 100"))
	}
	switch a.ExpiredMetricsAction {
	case ExpiredMetricsNeutral, ExpiredMetricsBlock:
	default:
		errs = append(errs, field.NotSupported(root.Child("expiredMetricsAction"), a.ExpiredMetricsAction,
			[]string{string(ExpiredMetricsNeutral), string(ExpiredMetricsBlock)}))
	}
	for r, v := range a.UsageThresholds {
		rp := root.Child("usageThresholds").Key(string(r))
		if r != v1.ResourceCPU && r != v1.ResourceMemory {
			errs = append(errs, field.NotSupported(rp, r, []string{string(v1.ResourceCPU), string(v1.ResourceMemory)}))
			continue
		}
		if v < 1 || v > 100 {
			errs = append(errs, field.Invalid(rp, v, "must be a percentage between 1 and 100"))
		}
	}
	return errs
}

// DecodeStrict decodes plugin args into out. obj may be nil (keep out as is), a
// *runtime.Unknown holding JSON or YAML (what kube-scheduler passes for out-of-tree plugins),
// or an object of out's own type (tests, the operator). Unknown or duplicate fields are errors
// naming the field; field names are case-sensitive, as in Kubernetes APIs.
func DecodeStrict(obj runtime.Object, out runtime.Object) error {
	if obj == nil {
		return nil
	}
	u, ok := obj.(*runtime.Unknown)
	if !ok {
		return fmt.Errorf("want args of type %T or runtime.Unknown, got %T", out, obj)
	}
	raw := u.Raw
	if len(raw) == 0 {
		return nil
	}
	switch u.ContentType {
	case runtime.ContentTypeJSON, "":
	case runtime.ContentTypeYAML:
		j, err := sigsyaml.YAMLToJSON(raw)
		if err != nil {
			return fmt.Errorf("decoding args: %w", err)
		}
		raw = j
	default:
		return fmt.Errorf("decoding args: unsupported content type %q", u.ContentType)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, out)
	if err != nil {
		return fmt.Errorf("decoding args: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("decoding args: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// CheckKind rejects args that name another kind: a config meant for another plugin pasted
// under this plugin's name would otherwise decode partly and be half-applied.
func CheckKind(root *field.Path, kind, want string) field.ErrorList {
	if kind != "" && kind != want {
		return field.ErrorList{field.Invalid(root.Child("kind"), kind, "must be "+want+" or omitted")}
	}
	return nil
}

// DeepCopy returns a copy sharing no pointers or maps with a.
func (a CommonArgs) DeepCopy() CommonArgs {
	out := a
	cp := func(p *int64) *int64 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	out.MetricsExpirySeconds = cp(a.MetricsExpirySeconds)
	out.NeutralScore = cp(a.NeutralScore)
	out.RefreshIntervalSeconds = cp(a.RefreshIntervalSeconds)
	out.WatcherTimeoutSeconds = cp(a.WatcherTimeoutSeconds)
	out.AssumedPodExpirySeconds = cp(a.AssumedPodExpirySeconds)
	if a.MetricProvider.InsecureSkipVerify != nil {
		v := *a.MetricProvider.InsecureSkipVerify
		out.MetricProvider.InsecureSkipVerify = &v
	}
	if a.UsageThresholds != nil {
		out.UsageThresholds = make(map[v1.ResourceName]int64, len(a.UsageThresholds))
		for k, v := range a.UsageThresholds {
			out.UsageThresholds[k] = v
		}
	}
	return out
}
