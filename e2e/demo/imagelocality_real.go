package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/e2e/images"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// seed004Ref stands in for the seed's busybox: a small image built here, offline, that sleeps
// (the pause binary under a name of its own, so its digest is its own too).
const seed004Ref = "localhost/berth/seed004-sleep:v1"

// demoAgentUser is the identity the demo's image agents write NodeImages as.
const demoAgentUser = "berth-demo-image-agent"

// imageLocalityRealDemo replays seed 004 on three real nodes: the image is imported into the
// containerd of two of them and not the third, berth-agent (the chart's agent binary) lists
// each node's images through the CRI and publishes NodeImages, and berth-scheduler with the
// seed's profile places the pods on the holders; the default scheduler places the same pods
// for contrast, and a pod it puts on the node without the image cannot start (pull policy
// Never, no registry).
func imageLocalityRealDemo(ctx context.Context, env *Env, rns []*cluster.RealNode) error {
	const ns, schedulerName, pods = imageLocalityNS, imageLocalityScheduler, imageLocalityPods
	c := env.Cluster
	workers := rns[:3]
	holders := map[string]bool{workers[1].NodeName: true, workers[2].NodeName: true}
	fmt.Fprintf(env.Out, "Real nodes: %s imported into the containerd of %s and %s, not %s.\n",
		seed004Ref, workers[1].NodeName, workers[2].NodeName, workers[0].NodeName)
	if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
		return err
	}
	if err := importSeed004(ctx, workers, holders); err != nil {
		return err
	}
	if err := demoAgentRBAC(ctx, env); err != nil {
		return err
	}
	stopAgents, err := startImageAgents(ctx, c, workers)
	defer stopAgents()
	if err != nil {
		return err
	}
	inv, err := waitNodeImages(ctx, c, workers, holders)
	if err != nil {
		return err
	}
	if err := printRealHoldings(ctx, env, workers, inv); err != nil {
		return err
	}
	if err := labelRealWorkers(ctx, env, workers); err != nil {
		return err
	}
	sched, ec, err := startRecording(ctx, env, c, "berth-scheduler-imagelocality",
		framework.SchedulerConfig(framework.NodeImageLocalityProfile(schedulerName, 100, true, "{}")))
	if err != nil {
		return err
	}
	defer c.StopComponent(sched.Process)
	if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
		return err
	}
	rows, err := placeInTurn(ctx, env, ec, ns, schedulerName, "seed004-sleep", pods, seed004Pod, nil)
	if err != nil {
		return err
	}
	waitContainersSettled(ctx, env)
	if err := checkRealPlacements(ctx, env, rows, holders); err != nil {
		return err
	}
	// The demo's pods go: the real nodes run the next scenarios.
	return env.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: "app=seed004-sleep"})
}

// importSeed004 builds the seed's image in a scratch directory and imports it into the
// containerd of the holders only.
func importSeed004(ctx context.Context, workers []*cluster.RealNode, holders map[string]bool) error {
	dir, err := os.MkdirTemp("", "berth-demo-seed004-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tar, err := buildSeed004Image(ctx, dir)
	if err != nil {
		return err
	}
	for _, w := range workers {
		if !holders[w.NodeName] {
			continue
		}
		if _, err := w.Ctr(ctx, "images", "import", tar); err != nil {
			return fmt.Errorf("importing %s into %s: %w", seed004Ref, w.NodeName, err)
		}
	}
	return nil
}

// startImageAgents starts one image agent per worker; stop stops those started, also when one
// fails to start.
func startImageAgents(ctx context.Context, c *cluster.Cluster, workers []*cluster.RealNode) (stop func(), err error) {
	var started []*cluster.Process
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			c.StopComponent(started[i])
		}
	}
	for _, w := range workers {
		p, err := startImageAgent(ctx, c, w)
		if err != nil {
			return stop, err
		}
		started = append(started, p)
	}
	return stop, nil
}

// waitNodeImages waits until each node's agent has published what its containerd holds: the
// holders' lists name the image and the third's has come without it.
func waitNodeImages(ctx context.Context, c *cluster.Cluster, workers []*cluster.RealNode, holders map[string]bool) (map[string]*berthv1alpha1.NodeImages, error) {
	scheme := k8sruntime.NewScheme()
	if err := berthv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	inv := map[string]*berthv1alpha1.NodeImages{}
	for _, w := range workers {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			ni := &berthv1alpha1.NodeImages{}
			if err := cl.Get(ctx, types.NamespacedName{Name: w.NodeName}, ni); err != nil {
				last = err.Error()
				return false, nil
			}
			inv[w.NodeName] = ni
			has := holdsTag(ni, seed004Ref)
			last = fmt.Sprintf("%d images, %s listed: %v", len(ni.Spec.Images), seed004Ref, has)
			return has == holders[w.NodeName] && len(ni.Spec.Images) > 0, nil
		})
		if err != nil {
			return nil, fmt.Errorf("NodeImages of %s from its agent: %s: %w", w.NodeName, last, err)
		}
	}
	return inv, nil
}

// printRealHoldings prints, per node, what its containerd reports now and what its agent
// published.
func printRealHoldings(ctx context.Context, env *Env, workers []*cluster.RealNode, inv map[string]*berthv1alpha1.NodeImages) error {
	fmt.Fprintln(env.Out, "What each node's containerd reports (ctr images ls, read now), and the NodeImages its agent published:")
	for _, w := range workers {
		out, err := w.Ctr(ctx, "images", "ls", "-q")
		if err != nil {
			return err
		}
		var refs []string
		for _, r := range strings.Fields(out) {
			if !strings.HasPrefix(r, "sha256:") && !strings.Contains(r, "@sha256:") {
				refs = append(refs, r)
			}
		}
		sort.Strings(refs)
		fmt.Fprintf(env.Out, "  %s containerd: %s\n", w.NodeName, strings.Join(refs, ", "))
		var tags []string
		for _, im := range inv[w.NodeName].Spec.Images {
			for _, t := range im.Tags {
				tags = append(tags, fmt.Sprintf("%s (%d kB)", t, im.SizeBytes/1000))
			}
		}
		sort.Strings(tags)
		fmt.Fprintf(env.Out, "  %s NodeImages: %s\n", w.NodeName, strings.Join(tags, ", "))
	}
	return nil
}

// labelRealWorkers labels the workers so that only the real nodes take the seed's pods.
func labelRealWorkers(ctx context.Context, env *Env, workers []*cluster.RealNode) error {
	for _, w := range workers {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, imageLocalityLabel))
		if _, err := env.Client.CoreV1().Nodes().Patch(ctx, w.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// seed004Pod is one of the seed's sleeping pods for scheduler: never pulled, so it can start
// only on a node that holds the image.
func seed004Pod(scheduler, name string) *corev1.Pod {
	spec := framework.PodSpec(scheduler, "100m", "32Mi")
	spec.Containers[0].Image, spec.Containers[0].ImagePullPolicy = seed004Ref, corev1.PullNever
	spec.NodeSelector = map[string]string{imageLocalityLabel: "true"}
	return framework.Pod(imageLocalityNS, name, map[string]string{"app": "seed004-sleep"}, spec)
}

// waitContainersSettled waits (up to 30 s) until every pod's container has left
// ContainerCreating, so the kubelets' verdict on the placements can be read.
func waitContainersSettled(ctx context.Context, env *Env) {
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := env.Client.CoreV1().Pods(imageLocalityNS).List(ctx, metav1.ListOptions{LabelSelector: "app=seed004-sleep"})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			if st := containerState(&list.Items[i]); st != "Running" && !strings.HasPrefix(st, "Waiting: Err") {
				return false, nil
			}
		}
		return true, nil
	})
}

// checkRealPlacements prints what the kubelets made of the placements (a pod on a node without
// the image cannot start) and holds the run to seed 004's promise.
func checkRealPlacements(ctx context.Context, env *Env, rows []placedPod, holders map[string]bool) error {
	const ns, schedulerName, pods = imageLocalityNS, imageLocalityScheduler, imageLocalityPods
	fmt.Fprintln(env.Out)
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSCHEDULER\tNODE\tNODE HOLDS THE IMAGE\tCONTAINER (kubelet)")
	onHolder := map[string]int{}
	for _, r := range rows {
		state := "?"
		if p, err := env.Client.CoreV1().Pods(ns).Get(ctx, r.pod, metav1.GetOptions{}); err == nil {
			state = containerState(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", r.pod, r.scheduler, r.node, holders[r.node], state)
		if holders[r.node] {
			onHolder[r.scheduler]++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "pods on a node that holds %s: %s %d/%d, default-scheduler %d/%d\n",
		seed004Ref, schedulerName, onHolder[schedulerName], pods, onHolder["default-scheduler"], pods)
	return checkSeed004(env.Out, schedulerName, onHolder[schedulerName], pods)
}

func holdsTag(ni *berthv1alpha1.NodeImages, tag string) bool {
	for _, im := range ni.Spec.Images {
		for _, t := range im.Tags {
			if t == tag {
				return true
			}
		}
	}
	return false
}

func containerState(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return string(p.Status.Phase)
	}
	s := p.Status.ContainerStatuses[0].State
	switch {
	case s.Running != nil:
		return "Running"
	case s.Waiting != nil:
		return "Waiting: " + s.Waiting.Reason
	case s.Terminated != nil:
		return "Terminated: " + s.Terminated.Reason
	}
	return string(p.Status.Phase)
}

// buildSeed004Image compiles the pause binary and packages it as seed004Ref (a few seconds,
// no network: the module cache has what it needs).
func buildSeed004Image(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	t := images.Target{Name: "seed004-sleep", Package: "./e2e/images/pause", LDFlags: "-s -w", Ref: seed004Ref}
	bin := filepath.Join(dir, t.Name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", t.LDFlags, "-o", bin, t.Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the seed 004 image: %w: %s", err, out)
	}
	img, err := images.Image(t, bin)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "seed004-sleep.tar")
	return path, images.Write(path, t.ImageRef(), img)
}

// demoAgentRBAC lets demoAgentUser publish NodeImages (and read the nodes it names as
// owners). The chart grants its agents this through per-node tokens and an admission policy;
// the demo's agents run as processes with a client certificate instead.
func demoAgentRBAC(ctx context.Context, env *Env) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: demoAgentUser}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{berthv1alpha1.GroupVersion.Group}, Resources: []string{"nodeimages", "nodeimages/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	}}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: demoAgentUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: demoAgentUser}}}
	if _, err := env.Client.RbacV1().ClusterRoles().Create(ctx, role, createOpts); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, createOpts); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// startImageAgent runs bin/berth-agent for node w in w's namespace against w's containerd:
// its image part lists the CRI every half second.
func startImageAgent(ctx context.Context, c *cluster.Cluster, w *cluster.RealNode) (*cluster.Process, error) {
	p, err := framework.StartAgentOn(ctx, c, w, "berth-agent-images-"+w.NodeName, demoAgentUser, "--image-interval=500ms")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("berth-agent for %s", w.NodeName), err)
	}
	return p, nil
}
