package demo

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

func init() {
	register(50, Scenario{Name: "NodeImageLocality: pods go where their image already is (seed 004: busybox on kind)", Run: imageLocalityDemo})
}

// The image-locality scenario's namespace, scheduler, node label and pods per scheduler, the
// same on simulated and on real nodes.
const (
	imageLocalityNS        = "demo-imagelocality"
	imageLocalityScheduler = "berth-imagelocality"
	imageLocalityLabel     = "berth.io/demo-imagelocality"
	imageLocalityPods      = 6
)

// imageLocalityDemo replays seed 004: three workers, busybox present on two of them as the
// agents report it in NodeImages while node.status.images stays empty (as on kind), a profile
// that scores with image locality alone (the seed's: every other score plugin disabled), and
// busybox pods created one after another. The same pods also go to the default scheduler.
func imageLocalityDemo(ctx context.Context, env *Env) error {
	const ns, schedulerName, label, pods = imageLocalityNS, imageLocalityScheduler, imageLocalityLabel, imageLocalityPods
	if rns := env.Cluster.RealNodes(); len(rns) >= 3 {
		return imageLocalityRealDemo(ctx, env, rns)
	} else if len(rns) > 0 {
		fmt.Fprintf(env.Out, "%d real node(s), seed 004 needs 3 (two holders and one without): replayed on simulated nodes with NodeImages written by the demo.\n", len(rns))
	} else {
		fmt.Fprintln(env.Out, "Simulated nodes: replayed with NodeImages written by the demo, as the seed's agents would publish them.")
	}
	workers := []string{"scheduler-worker", "scheduler-worker2", "scheduler-worker3"}
	holders := map[string]bool{"scheduler-worker2": true, "scheduler-worker3": true}
	dyn, err := addSimulatedHolders(ctx, env, workers, holders)
	if err != nil {
		return err
	}
	sched, ec, err := startRecording(ctx, env, env.Cluster, "berth-scheduler-imagelocality",
		framework.SchedulerConfig(framework.NodeImageLocalityProfile(schedulerName, 100, true, "{}")))
	if err != nil {
		return err
	}
	defer env.Cluster.StopComponent(sched.Process)
	if err := framework.EnsureNamespace(ctx, env.Client, ns); err != nil {
		return err
	}
	if err := printSimulatedHoldings(ctx, env, workers, holders); err != nil {
		return err
	}
	// The seed's busybox-sleep pods, one after another, for each scheduler.
	rows, err := placeInTurn(ctx, env, ec, ns, schedulerName, "busybox-sleep", pods, func(scheduler, name string) *corev1.Pod {
		return busyboxPod(ns, name, scheduler, label)
	}, func() {
		fmt.Fprintln(env.Out, "  (771 kB × 2/3 is under the in-tree 23 MiB floor, so the in-tree ImageLocality would score every node 0;\n"+
			"   NodeImageLocality's tie-break gives the holders 1 — with the seed's profile, image locality alone ranks the nodes)")
	})
	if err != nil {
		return err
	}
	if err := checkSimulatedPlacements(env, rows, holders); err != nil {
		return err
	}
	return printRealNodeImages(ctx, env, dyn)
}

// addSimulatedHolders adds the three simulated workers and writes NodeImages listing busybox
// for the holders, as the seed's agents would publish them.
func addSimulatedHolders(ctx context.Context, env *Env, workers []string, holders map[string]bool) (*dynamic.DynamicClient, error) {
	if err := framework.InstallNodeImagesCRD(ctx, env.Cluster.RESTConfig); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(env.Cluster.RESTConfig)
	if err != nil {
		return nil, err
	}
	for _, n := range workers {
		if err := env.Cluster.AddNodes(ctx, cluster.NodeSpec{Name: n, CPU: "4", Memory: "16Gi", Labels: map[string]string{imageLocalityLabel: "true"}}); err != nil {
			return nil, err
		}
	}
	if err := framework.WaitUntainted(ctx, env.Client, workers...); err != nil {
		return nil, err
	}
	// crictl images on the seed's workers: docker.io/library/busybox latest 771kB.
	busybox := framework.NodeImage{Tags: []string{"docker.io/library/busybox:latest"},
		Digests: []string{"docker.io/library/busybox@sha256:69593048aa3acfee0f75f20b77acb549de2472063053f6730c4091b53f2dfb02"}, Size: 771_000}
	for _, n := range workers {
		if holders[n] {
			if err := framework.WriteNodeImages(ctx, dyn, n, busybox); err != nil {
				return nil, err
			}
		}
	}
	return dyn, nil
}

// printSimulatedHoldings prints what each worker holds: by its NodeImages, and by the node's
// own status (empty, as on kind).
func printSimulatedHoldings(ctx context.Context, env *Env, workers []string, holders map[string]bool) error {
	nodeList, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byName := map[string]*corev1.Node{}
	for i := range nodeList.Items {
		byName[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	fmt.Fprintln(env.Out, "What the nodes hold:")
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tNodeImages (agent)\tnode.status.images")
	for _, n := range workers {
		inv := "-"
		if holders[n] {
			inv = "docker.io/library/busybox:latest 771kB"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d images\n", n, inv, len(byName[n].Status.Images))
	}
	return tw.Flush()
}

// checkSimulatedPlacements prints where each pod went and whether its node holds busybox, and
// holds the run to seed 004's promise.
func checkSimulatedPlacements(env *Env, rows []placedPod, holders map[string]bool) error {
	fmt.Fprintln(env.Out)
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tSCHEDULER\tNODE\tNODE HOLDS busybox")
	onHolder := map[string]int{}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", r.pod, r.scheduler, r.node, holders[r.node])
		if holders[r.node] {
			onHolder[r.scheduler]++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	const schedulerName, pods = imageLocalityScheduler, imageLocalityPods
	fmt.Fprintf(env.Out, "busybox pods on a node that holds busybox: %s %d/%d, default-scheduler %d/%d\n",
		schedulerName, onHolder[schedulerName], pods, onHolder["default-scheduler"], pods)
	return checkSeed004(env.Out, schedulerName, onHolder[schedulerName], pods)
}

// printRealNodeImages prints the NodeImages the real node's agent published, when a real node
// runs one.
func printRealNodeImages(ctx context.Context, env *Env, dyn dynamic.Interface) error {
	rn := env.Cluster.RealNode()
	if rn == nil {
		fmt.Fprintln(env.Out, "no real node in this run: the real agent's NodeImages line is skipped")
		return nil
	}
	obj, err := dyn.Resource(framework.NodeImagesGVR).Get(ctx, rn.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(env.Out, "real node %s: no NodeImages (no agent with a CRI socket runs on it in the demo); skipped\n", rn.NodeName)
	case err != nil:
		return err
	default:
		imgs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "images")
		var names []string
		for _, it := range imgs {
			if m, ok := it.(map[string]any); ok {
				if tags, ok := m["tags"].([]any); ok && len(tags) > 0 {
					names = append(names, fmt.Sprint(tags[0]))
				}
			}
		}
		sort.Strings(names)
		fmt.Fprintf(env.Out, "real node %s: NodeImages from its agent lists %d images: %s\n", rn.NodeName, len(imgs), strings.Join(names, ", "))
	}
	return nil
}

func busyboxPod(ns, name, scheduler, label string) *corev1.Pod {
	spec := framework.PodSpec(scheduler, "100m", "64Mi")
	spec.Containers[0].Image = "busybox"
	spec.Containers[0].Command = []string{"sleep", "3600"}
	spec.NodeSelector = map[string]string{label: "true"}
	return framework.Pod(ns, name, map[string]string{"app": "busybox-sleep"}, spec)
}

func waitBound(ctx context.Context, env *Env, ns, name string) (string, error) {
	var node string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("pod %s/%s not bound: %w", ns, name, err)
	}
	return node, nil
}

// placedPod is one pod of a scenario's sequence and the node its scheduler chose.
type placedPod struct{ pod, scheduler, node string }

// placeInTurn creates pods pods for scheduler berth (prefix-i), then as many for the default
// scheduler (prefix-default-i), one after another, each made by mk and waited for until bound.
// The first pod's scores, as the running scheduler computed them, are printed, then note (if
// any) is called.
func placeInTurn(ctx context.Context, env *Env, ec *framework.ExplainClient, ns, berth, prefix string, pods int,
	mk func(scheduler, name string) *corev1.Pod, note func()) ([]placedPod, error) {
	var rows []placedPod
	for _, s := range []struct{ name, prefix string }{{berth, prefix}, {"default-scheduler", prefix + "-default"}} {
		for i := 0; i < pods; i++ {
			p := mk(s.name, fmt.Sprintf("%s-%d", s.prefix, i))
			if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, createOpts); err != nil {
				return nil, err
			}
			node, err := waitBound(ctx, env, ns, p.Name)
			if err != nil {
				return nil, err
			}
			if s.name == berth && i == 0 {
				if _, err := printDecision(ctx, env, ec, ns, p.Name, "NodeImageLocality"); err != nil {
					return nil, err
				}
				if note != nil {
					note()
				}
			}
			rows = append(rows, placedPod{p.Name, s.name, node})
		}
	}
	return rows, nil
}

// checkSeed004 holds a run to seed 004's promise: every pod berth-scheduler placed is on a node
// that holds its image (the stock scheduler's count is printed for comparison, not promised).
func checkSeed004(out io.Writer, scheduler string, onHolder, pods int) error {
	if onHolder != pods {
		return fmt.Errorf("seed 004: %s put %d of %d pods on a node holding their image, want all %d", scheduler, onHolder, pods, pods)
	}
	fmt.Fprintf(out, "checked: seed 004, %d/%d of %s's pods on a node holding the image\n", onHolder, pods, scheduler)
	return nil
}
