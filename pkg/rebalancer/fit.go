package rebalancer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/isolation/classrule"
)

// Fitter runs the scheduler's own Filter verdicts for one pod on one node, in process: the
// upstream NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit plugins, each
// PreFilter then Filter, exactly as a scheduling cycle calls them, then InstanceIsolation's
// rule (pkg/isolation/classrule) with the args of the pod's profile. Why in process rather
// than asking the scheduler: a round checks many pod×node pairs, and the verdict must not
// depend on the scheduler being reachable. Why the rule and not Berth's plugin: the operator
// links no scheduler plugin (issue 36); the rule is the plugin's own Filter fallback.
type Fitter struct {
	plugins []fwk.FilterPlugin
	// isolation is InstanceIsolation's rule with its default args, for pods of a profile whose
	// configuration was not read; byProfile holds each read profile's own (nil: the profile
	// runs no InstanceIsolation).
	isolation *isolationRule
	byProfile map[string]*isolationRule
	// grants are the InstanceClasses (WatchGrants feeds them), so a moved pod's class is the
	// scheduler's effective class: its namespace's, or shared by an InstanceClass.
	grants *classrule.Grants
}

// isolationRule is InstanceIsolation as one profile configures it.
type isolationRule struct {
	cls            *classrule.Classifier
	strict, spread bool
}

// newIsolationRule reads args as the plugin's New does (args from parseIsolationArgs).
func newIsolationRule(args *classrule.Args, grants *classrule.Grants) *isolationRule {
	return &isolationRule{cls: classrule.NewClassifier(args, grants), strict: *args.Strict, spread: *args.SpreadReplicas}
}

// Grants is what the Fitter's InstanceIsolation knows of the InstanceClasses.
func (f *Fitter) Grants() *classrule.Grants { return f.grants }

// WatchGrants feeds the Fitter's grants from the manager's InstanceClass informer. Until it
// has synced every class is its pods' namespace's, which only refuses more moves.
func (f *Fitter) WatchGrants(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &berthv1alpha1.InstanceClass{}, crcache.BlockUntilSynced(false))
	if meta.IsNoMatchError(err) {
		// why: without the CRD there is no grant to follow; the fit check keeps every class
		// its pods' namespace's, as the scheduler does.
		return nil
	}
	if err != nil {
		return fmt.Errorf("InstanceClass informer: %w", err)
	}
	set := func(obj any) {
		if ic, ok := obj.(*berthv1alpha1.InstanceClass); ok {
			f.grants.Set(ic.Name, ic.Spec.Namespaces)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if ic, ok := obj.(*berthv1alpha1.InstanceClass); ok {
				f.grants.Set(ic.Name, nil)
			}
		},
	})
	return err
}

// NewFitter builds the upstream plugins with their default arguments and InstanceIsolation's
// rule with its defaults (WithProfiles gives each profile its own). The rule counts the
// classes of the pods given for the node, as the plugin's Filter does when its index does not
// know the node.
func NewFitter(ctx context.Context) (*Fitter, error) {
	fts := feature.Features{}
	var out []fwk.FilterPlugin
	add := func(p fwk.Plugin, err error) error {
		if err != nil {
			return err
		}
		fp, ok := p.(fwk.FilterPlugin)
		if !ok {
			return fmt.Errorf("%s is not a Filter plugin", p.Name())
		}
		out = append(out, fp)
		return nil
	}
	fitArgs := &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
		Type:      config.LeastAllocated,
		Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
	}}
	iiArgs, err := parseIsolationArgs(nil)
	if err != nil {
		return nil, err
	}
	for _, step := range []func() error{
		func() error { return add(nodeunschedulable.New(ctx, nil, nil, fts)) },
		func() error { return add(tainttoleration.New(ctx, nil, nil, fts)) },
		func() error { return add(nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, nil, fts)) },
		func() error { return add(noderesources.NewFit(ctx, fitArgs, nil, fts)) },
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("building the Filter plugins: %w", err)
		}
	}
	grants := classrule.NewGrants()
	return &Fitter{plugins: out, grants: grants, isolation: newIsolationRule(iiArgs, grants)}, nil
}

// WithProfiles returns a Fitter that gives pods of the named profiles their profile's
// InstanceIsolation verdict (or none where the profile does not run it); other pods keep
// the defaults.
func (f *Fitter) WithProfiles(_ context.Context, profiles map[string]Isolation) *Fitter {
	g := *f
	g.byProfile = make(map[string]*isolationRule, len(profiles))
	for name, iso := range profiles {
		if iso.Off {
			g.byProfile[name] = nil
			continue
		}
		g.byProfile[name] = newIsolationRule(iso.Args, f.grants)
	}
	return &g
}

// isolationFor is the InstanceIsolation pod's profile runs (nil: none).
func (f *Fitter) isolationFor(pod *corev1.Pod) *isolationRule {
	iso, read := f.byProfile[pod.Spec.SchedulerName]
	if !read {
		iso = f.isolation
	}
	return iso
}

// Fits says whether pod passes every Filter on node holding pods; reason names the first plugin
// that refused and why.
func (f *Fitter) Fits(ctx context.Context, pod *corev1.Pod, node *corev1.Node, pods []*corev1.Pod) (bool, string) {
	// The pod as the scheduler sees it when its replacement is created: not bound anywhere.
	p := pod.DeepCopy()
	p.Spec.NodeName = ""
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	nodes := []fwk.NodeInfo{ni}
	for _, pl := range f.plugins {
		state := framework.NewCycleState()
		if pf, ok := pl.(fwk.PreFilterPlugin); ok {
			res, st := pf.PreFilter(ctx, state, p, nodes)
			if st.IsSkip() {
				continue
			}
			if !st.IsSuccess() {
				return false, fmt.Sprintf("%s: %s", pl.Name(), st.Message())
			}
			if res != nil && !res.AllNodes() && !res.NodeNames.Has(node.Name) {
				return false, fmt.Sprintf("%s: node not among the pod's allowed nodes", pl.Name())
			}
		}
		if st := pl.Filter(ctx, state, p, ni); !st.IsSuccess() {
			return false, fmt.Sprintf("%s: %s", pl.Name(), st.Message())
		}
	}
	// why: last, as the scheduler's chain runs it after the upstream plugins, so the reason
	// names the same first refusal.
	if iso := f.isolationFor(pod); iso != nil {
		if reason, refuse := iso.cls.Verdict(p, pods, iso.strict, iso.spread); refuse {
			return false, fmt.Sprintf("%s: %s", classrule.PluginName, reason)
		}
	}
	return true, ""
}
