// Package exs measures what SySched is for: the extraneous-system-call exposure (KEP-399's ExS,
// summed over the nodes) of a mixed workload, placed once by berth-scheduler with SySched and
// once, with the very same pods, by berth-scheduler with the default plugins only. The figure is
// the workload ExS: only the workload's pods enter each node's sum, not the DaemonSet pods the
// nodes also run (which every placement shares alike), so it is not KEP-399's cluster ExS of
// everything on the nodes.
//
// Like package bench it runs a bare control plane (no KWOK, controller-manager or stock
// scheduler); nodes are Ready API objects and pods stay bound, which is all placement needs.
package exs

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched"
)

const (
	// SchedulerName is the profile name both configurations run, so pods are identical.
	SchedulerName = "exs-scheduler"
	// FullProfile is the profile SySched counts unconfined pods as (its default arg).
	FullProfile = "all-syscalls"
	namespace   = "exs"

	universe = 360 // about the x86_64 syscall table
	core     = 45  // what every dynamically linked process calls (read, mmap, futex, ...)
)

var seccompGVR = schema.GroupVersionResource{Group: "security-profiles-operator.x-k8s.io", Version: "v1", Resource: "seccompprofiles"}

// Options size the workload.
type Options struct {
	Nodes, Pods, Profiles int
	// DaemonSets is how many DaemonSets run a pod on every node before the workload (the
	// first with RuntimeDefault, the rest without a profile, as CNIs, log shippers and Berth's
	// agent do); 0 is bare nodes.
	DaemonSets int
	// Seed makes the profiles and the pod mix reproducible.
	Seed                int64
	NodeCPU, NodeMemory string
	PodCPU, PodMemory   string
	// Dir keeps the cluster's state and logs (default: a temporary directory removed at the end).
	Dir  string
	Logf func(string, ...any)
}

// Profile is one synthetic seccomp profile.
type Profile struct {
	Name     string
	Syscalls []string
}

// Run is one placement of the workload.
type Run struct {
	Config    string
	Placement map[string]string // pod → node
	ExS       int
	NodesUsed int
	// ProfilesPerNode is the mean and max number of distinct profiles sharing a used node.
	MeanProfilesPerNode float64
	MaxProfilesPerNode  int
	Duration            time.Duration
}

// Result is both placements of one workload.
type Result struct {
	Options    Options
	Profiles   []Profile
	PodProfile map[string]string // pod → profile name
	Runs       []Run
}

// config is one scheduler configuration under comparison.
type config struct {
	name     string
	profiles string
}

var configs = []config{
	{"berth-scheduler + SySched", framework.SySchedProfile(SchedulerName, FullProfile)},
	// SySched as KEP-399 counts: every pod, DaemonSet pods included.
	{"SySched, daemonSetPods: Count", framework.SySchedProfile(SchedulerName, FullProfile) + "      daemonSetPods: Count\n"},
	{"berth-scheduler (default plugins)", "- schedulerName: " + SchedulerName + "\n"},
}

// SyntheticProfiles returns n profiles over a 360-name syscall universe: each has the 45 names
// every process needs plus a random share of the rest, for 60–250 names in all (the examples'
// nginx, redis and memcached profiles have 127, 96 and 93).
func SyntheticProfiles(n int, seed int64) []Profile {
	rng := rand.New(rand.NewSource(seed))
	names := make([]string, universe)
	for i := range names {
		names[i] = fmt.Sprintf("sys_%03d", i)
	}
	out := make([]Profile, n)
	for i := range out {
		size := 60 + rng.Intn(191)
		s := append([]string(nil), names[:core]...)
		for _, j := range rng.Perm(universe - core)[:size-core] {
			s = append(s, names[core+j])
		}
		out[i] = Profile{Name: fmt.Sprintf("synthetic-%02d", i), Syscalls: s}
	}
	return out
}

func (o *Options) defaults() error {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.NodeCPU == "" {
		o.NodeCPU, o.NodeMemory = "8", "32Gi"
	}
	if o.PodCPU == "" {
		o.PodCPU, o.PodMemory = "100m", "128Mi"
	}
	if o.Nodes < 1 || o.Pods < 1 || o.Profiles < 1 {
		return fmt.Errorf("nodes, pods and profiles must be positive (got %d, %d, %d)", o.Nodes, o.Pods, o.Profiles)
	}
	return nil
}

// Execute starts a cluster, creates nodes and profiles, and places the same pods with each
// configuration in turn.
func Execute(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &Result{Options: o, Profiles: SyntheticProfiles(o.Profiles, o.Seed), PodProfile: map[string]string{}}
	c, err := cluster.Start(ctx, cluster.Config{Dir: o.Dir, WithoutKWOK: true, WithoutDefaultScheduler: true, WithoutControllerManager: true, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	specs := make([]cluster.NodeSpec, o.Nodes)
	for i := range specs {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("exs-node-%02d", i), CPU: o.NodeCPU, Memory: o.NodeMemory}
	}
	if err := c.AddNodes(ctx, specs...); err != nil {
		return nil, err
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// No controller-manager runs here to create it, and admission refuses pods without it.
	if _, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	if err := InstallProfiles(ctx, dyn, res.Profiles); err != nil {
		return nil, err
	}
	if err := daemonPods(ctx, c, specs, o.DaemonSets); err != nil {
		return nil, err
	}
	// A mixed workload: every profile equally often, in a shuffled order.
	rng := rand.New(rand.NewSource(o.Seed + 1))
	pods := make([]*corev1.Pod, o.Pods)
	for i, j := range rng.Perm(o.Pods) {
		prof := res.Profiles[j%o.Profiles].Name
		name := fmt.Sprintf("pod-%04d", i)
		spec := framework.PodSpec(SchedulerName, o.PodCPU, o.PodMemory)
		path := LocalhostPath(prof)
		spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}}
		pods[i] = framework.Pod(namespace, name, map[string]string{"exs": "yes"}, spec)
		res.PodProfile[name] = prof
	}
	for _, cfg := range configs {
		run, err := place(ctx, c, cfg, pods, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, err)
		}
		run.ExS = res.ExS(run.Placement)
		res.Runs = append(res.Runs, run)
		o.Logf("%s: workload ExS %d", run.Config, run.ExS)
	}
	res.fillStats()
	return res, nil
}

// daemonPods creates n DaemonSets and, as their controller would, one bound pod of each on
// every node: the first with RuntimeDefault, the others with no profile. They stay through
// every placement (only the workload's pods are deleted between runs) and count in no
// configuration's ExS below: the measure is the workload's exposure.
func daemonPods(ctx context.Context, c *cluster.Cluster, nodes []cluster.NodeSpec, n int) error {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("node-daemon-%d", i)
		labels := map[string]string{"daemon": name}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "d", Image: "registry.k8s.io/pause:3.10"}}}}}}
		ds, err := c.Client.AppsV1().DaemonSets(namespace).Create(ctx, ds, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ctrl := true
		for _, node := range nodes {
			spec := framework.PodSpec("default-scheduler", "10m", "16Mi")
			spec.NodeName = node.Name
			if i == 0 {
				spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			}
			p := framework.Pod(namespace, name+"-"+node.Name, labels, spec)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: name, UID: ds.UID, Controller: &ctrl}}
			if _, err := c.Client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// InstallProfiles creates the full profile (every name of the synthetic universe, named
// FullProfile) and profs as cluster-scoped SeccompProfiles.
func InstallProfiles(ctx context.Context, dyn dynamic.Interface, profs []Profile) error {
	all := make([]string, universe)
	for i := range all {
		all[i] = fmt.Sprintf("sys_%03d", i)
	}
	for _, p := range append([]Profile{{Name: FullProfile, Syscalls: all}}, profs...) {
		if err := createProfile(ctx, dyn, p); err != nil {
			return fmt.Errorf("SeccompProfile %s: %w", p.Name, err)
		}
	}
	return nil
}

// LocalhostPath is the securityContext path of a cluster-scoped SPO profile.
func LocalhostPath(profile string) string { return "operator/" + profile + ".json" }

func createProfile(ctx context.Context, dyn dynamic.Interface, p Profile) error {
	names := make([]any, len(p.Syscalls))
	for i, s := range p.Syscalls {
		names[i] = s
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": seccompGVR.GroupVersion().String(), "kind": "SeccompProfile",
		"metadata": map[string]any{"name": p.Name},
		"spec": map[string]any{"defaultAction": "SCMP_ACT_ERRNO",
			"syscalls": []any{map[string]any{"action": "SCMP_ACT_ALLOW", "names": names}}},
	}}
	_, err := dyn.Resource(seccompGVR).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// place creates the pods while no scheduler runs (so both configurations see the same queue),
// starts the scheduler, waits until every pod is bound, records the placement, then stops the
// scheduler and deletes the pods.
func place(ctx context.Context, c *cluster.Cluster, cfg config, pods []*corev1.Pod, o Options) (Run, error) {
	o.Logf("%s: creating %d pods", cfg.name, len(pods))
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(namespace).Create(ctx, p.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return Run{}, err
		}
	}
	config := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection: {qps: 5000, burst: 5000}\nleaderElection: {leaderElect: false}\nprofiles:\n" + cfg.profiles
	start := time.Now()
	sched, err := c.StartBerthScheduler(ctx, cluster.SchedulerOptions{Name: "exs-berth-scheduler", Config: config})
	if err != nil {
		return Run{}, err
	}
	defer c.StopComponent(sched.Process)
	run := Run{Config: cfg.name, Placement: map[string]string{}}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Duration(len(pods))*100*time.Millisecond+2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, _ := sched.Exited(); exited {
			return false, fmt.Errorf("berth-scheduler exited:\n%s", sched.Tail(20))
		}
		list, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "exs=yes"})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				run.Placement[p.Name] = p.Spec.NodeName
			}
		}
		return len(run.Placement) == len(pods), nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("%d of %d pods bound: %w", len(run.Placement), len(pods), err)
	}
	run.Duration = time.Since(start)
	c.StopComponent(sched.Process)
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: "exs=yes"}); err != nil {
		return Run{}, err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "exs=yes", Limit: 1})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("pods not deleted: %w", err)
	}
	return run, nil
}

// ExS is the workload ExS of a placement (pod → node): KEP-399's ExS over this workload's pods
// only, DaemonSet pods left out.
func (r *Result) ExS(placement map[string]string) int {
	sets := map[string][]string{}
	for _, p := range r.Profiles {
		sets[p.Name] = p.Syscalls
	}
	perNode := map[string][][]string{}
	for pod, node := range placement {
		perNode[node] = append(perNode[node], sets[r.PodProfile[pod]])
	}
	return sysched.ClusterExS(perNode)
}

func (r *Result) fillStats() {
	for i := range r.Runs {
		run := &r.Runs[i]
		distinct := map[string]map[string]bool{}
		for pod, node := range run.Placement {
			if distinct[node] == nil {
				distinct[node] = map[string]bool{}
			}
			distinct[node][r.PodProfile[pod]] = true
		}
		run.NodesUsed, run.MaxProfilesPerNode, run.MeanProfilesPerNode = len(distinct), 0, 0
		for _, d := range distinct {
			run.MeanProfilesPerNode += float64(len(d))
			if len(d) > run.MaxProfilesPerNode {
				run.MaxProfilesPerNode = len(d)
			}
		}
		if run.NodesUsed > 0 {
			run.MeanProfilesPerNode /= float64(run.NodesUsed)
		}
	}
}

// Print writes the comparison table.
func (r *Result) Print(w io.Writer) {
	if len(r.Runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	o := r.Options
	sizes := make([]int, len(r.Profiles))
	for i, p := range r.Profiles {
		sizes[i] = len(p.Syscalls)
	}
	sort.Ints(sizes)
	fmt.Fprintf(w, "Workload ExS (KEP-399's ExS over the workload's pods, DaemonSet pods excluded): %d pods, %d profiles (syscalls: %s), %d nodes each running %d DaemonSet pods, seed %d\n\n",
		o.Pods, o.Profiles, strings.Trim(fmt.Sprint(sizes), "[]"), o.Nodes, o.DaemonSets, o.Seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	// The last configuration (default plugins) is the reference.
	ref := r.Runs[len(r.Runs)-1]
	fmt.Fprintf(tw, "configuration\tworkload ExS\tExS per pod\tnodes used\tprofiles per node (mean)\t(max)\tExS vs %s\t\n", ref.Config)
	for _, run := range r.Runs {
		ratio := "-"
		if ref.ExS > 0 {
			ratio = fmt.Sprintf("%.2f", float64(run.ExS)/float64(ref.ExS))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.1f\t%d\t%s\t\n", run.Config, run.ExS, float64(run.ExS)/float64(len(run.Placement)),
			run.NodesUsed, run.MeanProfilesPerNode, run.MaxProfilesPerNode, ratio)
	}
	tw.Flush()
}
