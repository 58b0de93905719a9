package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched"
	"github.com/berth-sched/berth/pkg/scheduler/plugins/sysched/profiles"
)

func init() {
	register(30, Scenario{Name: "SySched: pods with similar system calls share a node (seed 000)", Run: syschedDemo})
}

const (
	syschedDemoNS        = "demo-sysched"
	syschedDemoScheduler = "berth-sysched"
	syschedDemoLabel     = "berth-demo"
	syschedDemoLabelVal  = "sysched"
)

// syschedDemoConfig is examples/sysched/scheduler-config.yaml under its own profile name, for a
// second berth-scheduler process that runs beside the demo's default one (no leader election,
// so it needs no Lease of its own).
var syschedDemoConfig = framework.SchedulerConfig(framework.SySchedProfile(syschedDemoScheduler, "all-syscalls"))

// syschedDemo replays seed 000: the example SeccompProfiles and ProfileBindings, then nginx1,
// redis1, nginx2 and memcached1, each bound before the next, on two fresh nodes only these pods
// may use. It prints where each pod went and each node's syscall count and ExS.
func syschedDemo(ctx context.Context, env *Env) error {
	dir, err := syschedExamplesDir(env.Cluster)
	if err != nil {
		return err
	}
	if err := framework.EnsureNamespace(ctx, env.Client, syschedDemoNS); err != nil {
		return err
	}
	sets, imageProfile, err := createSySchedExamples(ctx, env, dir)
	if err != nil {
		return err
	}
	nodes := []string{"sysched-node-1", "sysched-node-2"}
	if err := addSySchedNodes(ctx, env, nodes); err != nil {
		return err
	}
	if err := runSySchedDaemonSets(ctx, env, len(nodes)); err != nil {
		return err
	}
	sched, ec, err := startRecording(ctx, env, env.Cluster, "berth-scheduler-sysched", syschedDemoConfig)
	if err != nil {
		return err
	}
	defer env.Cluster.StopComponent(sched.Process)
	fmt.Fprintln(env.Out, "SySched's scores as the running scheduler computed them (raw = the pod's ExS on the node, normalised: lowest ExS → 100):")
	rows, err := placeSySchedPods(ctx, env, ec, dir, imageProfile)
	if err != nil {
		return err
	}
	if err := printSySchedOutcome(env, rows, sets, nodes); err != nil {
		return err
	}
	return checkSeed000(env, rows)
}

// createSySchedExamples creates the example SeccompProfiles and ProfileBindings, and returns
// profile name → syscalls and image → profile, read from the same files the cluster gets.
func createSySchedExamples(ctx context.Context, env *Env, dir string) (sets map[string][]string, imageProfile map[string]string, err error) {
	dyn, err := dynamic.NewForConfig(env.Cluster.RESTConfig)
	if err != nil {
		return nil, nil, err
	}
	sets = map[string][]string{}
	imageProfile = map[string]string{}
	for _, f := range []string{"full.profile.yaml", "nginx.profile.yaml", "redis.profile.yaml", "memcached.profile.yaml",
		"nginx.binding.yaml", "redis.binding.yaml", "memcached.binding.yaml"} {
		docs, err := framework.ReadYAMLDocs(filepath.Join(dir, f))
		if err != nil {
			return nil, nil, err
		}
		for _, m := range docs {
			obj := &unstructured.Unstructured{Object: m}
			switch obj.GetKind() {
			case "SeccompProfile":
				p, errs := profiles.ParseProfile(m)
				if p == nil || len(errs) > 0 {
					return nil, nil, fmt.Errorf("%s: %v", f, errs)
				}
				sets[p.Key.Name] = p.Syscalls
			case "ProfileBinding":
				b, err := profiles.ParseBinding(m)
				if err != nil || b == nil {
					return nil, nil, fmt.Errorf("%s: not a SeccompProfile binding (%v)", f, err)
				}
				imageProfile[b.Image] = b.ProfileName
				obj.SetNamespace(syschedDemoNS)
			}
			if err := framework.CreateUnstructured(ctx, dyn, obj); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return sets, imageProfile, nil
}

// addSySchedNodes adds the two fresh nodes only the scenario's pods may use.
func addSySchedNodes(ctx context.Context, env *Env, nodes []string) error {
	for _, n := range nodes {
		if err := env.Cluster.AddNodes(ctx, cluster.NodeSpec{Name: n, CPU: "4", Memory: "16Gi",
			Labels: map[string]string{syschedDemoLabel: syschedDemoLabelVal}}); err != nil {
			return err
		}
	}
	// Ready is not enough: the controller-manager lifts the not-ready taint a moment later, and
	// a pod scheduled before that would see only one of the two nodes.
	return framework.WaitUntainted(ctx, env.Client, nodes...)
}

// runSySchedDaemonSets runs what every real node runs: DaemonSet pods (Berth's own agent with
// RuntimeDefault, a log shipper without a profile). SySched leaves them out of each node's
// syscall union (daemonSetPods: Exclude, its default); counted, they would make every node's
// union the full set and every score a tie.
func runSySchedDaemonSets(ctx context.Context, env *Env, nodes int) error {
	daemonPods := 0
	for i, name := range []string{"node-agent", "log-shipper"} {
		labels := map[string]string{"app": name, "role": "demo-daemon"}
		spec := framework.PodSpec("", "10m", "16Mi")
		spec.NodeSelector = map[string]string{syschedDemoLabel: syschedDemoLabelVal}
		if i == 0 {
			spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: syschedDemoNS, Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
		if _, err := env.Client.AppsV1().DaemonSets(syschedDemoNS).Create(ctx, ds, createOpts); err != nil {
			return err
		}
		daemonPods += nodes
	}
	running, err := framework.WaitPods(ctx, env.Client, syschedDemoNS, "role=demo-daemon", daemonPods, 2*time.Minute, framework.Running)
	if err != nil {
		return fmt.Errorf("DaemonSet pods: %w", err)
	}
	perDaemonNode := map[string]int{}
	for _, p := range running {
		perDaemonNode[p.Spec.NodeName]++
	}
	fmt.Fprintf(env.Out, "DaemonSet pods Running beside the seed's pods (node-agent with RuntimeDefault, log-shipper unconfined): %v\n", perDaemonNode)
	return nil
}

// syschedPlaced is where one of the seed's pods went, and the profile its image is bound to.
type syschedPlaced struct{ pod, profile, node string }

// placeSySchedPods deploys the seed's pods in its order, each bound before the next, and prints
// SySched's part of each decision.
func placeSySchedPods(ctx context.Context, env *Env, ec *framework.ExplainClient, dir string, imageProfile map[string]string) ([]syschedPlaced, error) {
	var rows []syschedPlaced
	for _, app := range []string{"nginx1", "redis1", "nginx2", "memcached1"} {
		dep, err := syschedDeployment(filepath.Join(dir, app+".yaml"))
		if err != nil {
			return nil, err
		}
		dep.Namespace = syschedDemoNS
		dep.Spec.Template.Spec.SchedulerName = syschedDemoScheduler
		dep.Spec.Template.Spec.NodeSelector = map[string]string{syschedDemoLabel: syschedDemoLabelVal}
		// The seed's manifests, placed on the demo's simulated nodes.
		dep.Spec.Template.Spec.Tolerations = cluster.TolerateSimulated(dep.Spec.Template.Spec.Tolerations)
		if _, err := env.Client.AppsV1().Deployments(syschedDemoNS).Create(ctx, dep, createOpts); err != nil {
			return nil, err
		}
		pods, err := framework.WaitPods(ctx, env.Client, syschedDemoNS, "app="+app, 1, 2*time.Minute, framework.Bound)
		if err != nil {
			return nil, err
		}
		if _, err := printDecision(ctx, env, ec, syschedDemoNS, pods[0].Name, "SySched"); err != nil {
			return nil, err
		}
		prof := imageProfile[pods[0].Spec.Containers[0].Image]
		if prof == "" {
			prof = "all-syscalls" // no binding: counted as the full profile
		}
		rows = append(rows, syschedPlaced{pods[0].Name, prof, pods[0].Spec.NodeName})
	}
	return rows, nil
}

// printSySchedOutcome prints where each pod went and then the outcome, not a score: each node's
// ExS with the pods it ended up with, from the example profiles (KEP-399's cluster metric that
// the scores minimise pod by pod).
func printSySchedOutcome(env *Env, rows []syschedPlaced, sets map[string][]string, nodes []string) error {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tPROFILE (via ProfileBinding)\tNODE")
	perNode := map[string][][]string{}
	names := map[string][]string{}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.pod, r.profile, r.node)
		perNode[r.node] = append(perNode[r.node], sets[r.profile])
		names[r.node] = append(names[r.node], strings.SplitN(r.pod, "-", 2)[0])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.Out)
	fmt.Fprintln(env.Out, "Outcome (computed from the example profiles):")
	tw = tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPODS\tSYSCALLS EXPOSED\tExS")
	nodes = append([]string(nil), nodes...)
	sort.Strings(nodes)
	for _, n := range nodes {
		union := map[string]struct{}{}
		for _, s := range perNode[n] {
			for _, c := range s {
				union[c] = struct{}{}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", n, strings.Join(names[n], ", "), len(union), sysched.NodeExS(perNode[n]))
	}
	fmt.Fprintf(tw, "cluster\t\t\t%d\n", sysched.ClusterExS(perNode))
	return tw.Flush()
}

// checkSeed000 checks seed 000's promise, in its deployment order: the two nginx pods share a
// node, redis and memcached the other.
func checkSeed000(env *Env, rows []syschedPlaced) error {
	byApp := map[string]string{}
	for _, r := range rows {
		byApp[strings.SplitN(r.pod, "-", 2)[0]] = r.node
	}
	if !(byApp["nginx1"] == byApp["nginx2"] && byApp["redis1"] == byApp["memcached1"] && byApp["nginx1"] != byApp["redis1"]) {
		return fmt.Errorf("seed 000: want nginx1+nginx2 on one node and redis1+memcached1 on the other, got %v", byApp)
	}
	fmt.Fprintln(env.Out, "checked: seed 000's grouping, nginx1+nginx2 on one node, redis1+memcached1 on the other")
	return nil
}

// syschedExamplesDir finds examples/sysched: beside the cluster's bin/ directory, else above
// the working directory.
func syschedExamplesDir(c *cluster.Cluster) (string, error) {
	var cands []string
	if c.BinDir != "" {
		cands = append(cands, filepath.Join(filepath.Dir(c.BinDir), "examples", "sysched"))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			cands = append(cands, filepath.Join(d, "examples", "sysched"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, d := range cands {
		if st, err := os.Stat(filepath.Join(d, "nginx.profile.yaml")); err == nil && !st.IsDir() {
			return d, nil
		}
	}
	return "", errors.New("examples/sysched not found beside bin/ or above the working directory")
}

func syschedDeployment(path string) (*appsv1.Deployment, error) {
	docs, err := framework.ReadYAMLDocs(path)
	if err != nil {
		return nil, err
	}
	for _, m := range docs {
		if m["kind"] != "Deployment" {
			continue
		}
		raw, _ := yaml.Marshal(m)
		dep := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(raw, dep); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return dep, nil
	}
	return nil, fmt.Errorf("%s: no Deployment", path)
}
