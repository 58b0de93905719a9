// Package webhook is Berth's instance-isolation admission webhook, served by the operator: it
// mutates pods that carry an instance class (IPP's ipp-class label or berth.dev/instance-class)
// so they run on the class node pool and stay apart from other classes, in one of three modes
// (ipp, berth, both), always merging with what the pod already asks for. It also owns its
// serving certificate (generated, rotated, CA bundle injected into its
// MutatingWebhookConfiguration). See README.md.
package webhook

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Mode says what the webhook writes into a classed pod.
type Mode string

const (
	// ModeIPP writes what the Instance-per-Pod webhook writes (toleration, node affinity to the
	// pool, required pod anti-affinity per hostname) but merged, cluster-wide and with replica
	// spreading for any controller kind. The default scheduler enforces it.
	ModeIPP Mode = "ipp"
	// ModeBerth sends the pod to berth-scheduler (when it asked for no other scheduler) with
	// the toleration and node affinity; the InstanceIsolation plugin enforces isolation.
	ModeBerth Mode = "berth"
	// ModeBoth is ModeBerth plus IPP's anti-affinity term, which Cluster Autoscaler
	// understands; the pod goes to the isolated profile when its only pod-affinity terms are
	// the webhook's.
	ModeBoth Mode = "both"
)

// Modes lists the valid modes.
var Modes = []string{string(ModeIPP), string(ModeBerth), string(ModeBoth)}

// DefaultClassLabels are the pod label keys carrying an instance class, the same as the
// InstanceIsolation plugin's defaults (a test keeps them equal).
var DefaultClassLabels = []string{"ipp-class", "berth.dev/instance-class"}

const (
	// DefaultSchedulerName is the SecondaryScheduler's default schedulerName.
	DefaultSchedulerName = "berth-scheduler"
	// SpreadLabel carries the UID of a classed pod's controller (any kind) so one required
	// anti-affinity term keeps its replicas on different nodes (IPP's ipp-rs-uid, generalised).
	SpreadLabel = "berth.dev/isolation-controller-uid"
	// MirrorPodAnnotation marks the API mirror of a static pod; those are never mutated.
	MirrorPodAnnotation = "kubernetes.io/config.mirror"
	// defaultScheduler is the name the API server defaults spec.schedulerName to.
	defaultScheduler = corev1.DefaultSchedulerName
)

// Config is what the webhook writes. The zero value is not valid: use Defaults and Validate.
type Config struct {
	Mode Mode
	// ClassLabels are the pod label keys whose value is the class (first present wins for the
	// anti-affinity term; two present with different values are refused).
	ClassLabels []string
	// PoolLabel=PoolValue is the node label of the class node pool (required node affinity).
	PoolLabel, PoolValue string
	// TaintKey=TaintValue:TaintEffect is the pool's taint the pods tolerate.
	TaintKey, TaintValue string
	TaintEffect          corev1.TaintEffect
	// SchedulerName is berth-scheduler's main profile (modes berth and both).
	SchedulerName string
	// IsolatedSchedulerName is the profile with InterPodAffinity off and InstanceIsolation on
	// (SecondaryScheduler spec.plugins.instanceIsolation.isolatedProfileName) that mode both
	// sends pods to when the webhook's terms are their only pod-affinity terms. Empty: the
	// main profile, which then evaluates the term with InterPodAffinity.
	IsolatedSchedulerName string
	// SpreadReplicas keeps a controller's classed replicas on different nodes: in modes ipp
	// and both with a required anti-affinity term on SpreadLabel; in mode berth the plugin's
	// spreadReplicas does it (and it must be on for the isolated profile of mode both).
	SpreadReplicas bool
	// Nodes reads Nodes from a cache, to tell a pool node (pool label, or a taint with the pool's
	// key) named in spec.nodeName or a binding's target (nodename.go). nil: every pod naming a
	// node and every binding by someone other than PoolBinders is refused, since the webhook
	// cannot tell a pool node.
	Nodes NodeLookup
	// PoolBinders are the usernames that may bind pods to pool nodes: the schedulers of the
	// classes (berth-scheduler's ServiceAccounts; in mode ipp also system:kube-scheduler).
	PoolBinders []string
	// ExemptNamespaces are left alone entirely: their pods may carry a class without being
	// mutated, be DaemonSet pods of a class, and tolerate the pool taint or select its nodes
	// without a class. The chart's namespaceSelector keeps the API server from calling the
	// webhook there at all (the release namespace, so the operator can always come back, and
	// kube-system by default); the webhook checks the list too, so a configuration written by
	// hand without the selector cannot make it refuse the control plane's node daemons.
	ExemptNamespaces []string
	// AutoscalerMarker: write the two marker terms into every classed pod's required node
	// affinity (marker In [its class's value], then marker DoesNotExist) and refuse pods that
	// select another class's marker (README.md, "The autoscaler's view"). The operator's marker
	// writer keeps the label on the pool's nodes.
	AutoscalerMarker bool
	// Classes reads the InstanceClasses that share a class between namespaces. nil: there are
	// none, and every class belongs to the namespace of the pod carrying it.
	Classes ClassGrants
}

// Defaults is the seed's pool (label and taint ipp=true:NoSchedule) in mode berth.
func Defaults() Config {
	return Config{
		Mode:        ModeBerth,
		ClassLabels: append([]string(nil), DefaultClassLabels...),
		PoolLabel:   "ipp", PoolValue: "true",
		TaintKey: "ipp", TaintValue: "true", TaintEffect: corev1.TaintEffectNoSchedule,
		SchedulerName:    DefaultSchedulerName,
		SpreadReplicas:   true,
		ExemptNamespaces: []string{metav1.NamespaceSystem},
		AutoscalerMarker: true,
	}
}

// Validate returns every problem with c, each naming its flag.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	switch c.Mode {
	case ModeIPP, ModeBerth, ModeBoth:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("mode"), c.Mode, Modes))
	}
	p := field.NewPath("classLabels")
	if len(c.ClassLabels) == 0 {
		errs = append(errs, field.Required(p, "at least one pod label key"))
	}
	seen := map[string]bool{}
	for i, k := range c.ClassLabels {
		for _, m := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Index(i), k, "must be a label key: "+m))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(p.Index(i), k))
		}
		seen[k] = true
	}
	errs = append(errs, labelPair(field.NewPath("poolLabel"), c.PoolLabel, c.PoolValue)...)
	errs = append(errs, labelPair(field.NewPath("poolTaint"), c.TaintKey, c.TaintValue)...)
	switch c.TaintEffect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("poolTaint", "effect"), c.TaintEffect,
			[]string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	if c.Mode != ModeIPP {
		errs = append(errs, schedulerName(field.NewPath("schedulerName"), c.SchedulerName, true)...)
	}
	ns := field.NewPath("exemptNamespaces")
	seenNS := map[string]bool{}
	for i, n := range c.ExemptNamespaces {
		for _, m := range validation.IsDNS1123Label(n) {
			errs = append(errs, field.Invalid(ns.Index(i), n, "must be a namespace name: "+m))
		}
		if seenNS[n] {
			errs = append(errs, field.Duplicate(ns.Index(i), n))
		}
		seenNS[n] = true
	}
	errs = append(errs, c.validatePoolBinders()...)
	if c.IsolatedSchedulerName != "" {
		errs = append(errs, schedulerName(field.NewPath("isolatedSchedulerName"), c.IsolatedSchedulerName, false)...)
		if c.IsolatedSchedulerName == c.SchedulerName {
			errs = append(errs, field.Invalid(field.NewPath("isolatedSchedulerName"), c.IsolatedSchedulerName, "must differ from schedulerName"))
		}
	}
	return errs
}

func labelPair(p *field.Path, key, value string) field.ErrorList {
	var errs field.ErrorList
	for _, m := range validation.IsQualifiedName(key) {
		errs = append(errs, field.Invalid(p.Child("key"), key, m))
	}
	for _, m := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(p.Child("value"), value, m))
	}
	return errs
}

func schedulerName(p *field.Path, name string, required bool) field.ErrorList {
	if name == "" {
		if required {
			return field.ErrorList{field.Required(p, "berth-scheduler's profile name")}
		}
		return nil
	}
	if name == defaultScheduler {
		return field.ErrorList{field.Invalid(p, name, "must be a Berth profile, not the default scheduler")}
	}
	var errs field.ErrorList
	for _, m := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, m))
	}
	return errs
}

// ParseLabelPair parses "key=value" (the --isolation-pool-label flag).
func ParseLabelPair(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%q: want key=value", s)
	}
	return k, v, nil
}

// ParseTaint parses "key=value:Effect" (the --isolation-pool-taint flag).
func ParseTaint(s string) (key, value string, effect corev1.TaintEffect, err error) {
	kv, eff, ok := strings.Cut(s, ":")
	if !ok || eff == "" {
		return "", "", "", fmt.Errorf("%q: want key=value:Effect", s)
	}
	k, v, err := ParseLabelPair(kv)
	if err != nil {
		return "", "", "", fmt.Errorf("%q: want key=value:Effect", s)
	}
	return k, v, corev1.TaintEffect(eff), nil
}
