// Package imageshare measures how often pods land on a node that already holds their image:
// a fixed random inventory (images of mixed sizes on random subsets of the nodes), the same
// pods scheduled by each profile in turn on the same cluster, the share of pods placed on a
// node whose inventory listed their image before the run.
//
// Nodes are bare API objects (no kubelet, no KWOK). Every node reports its inventory twice,
// as a real containerd node would be seen: in node.status.images (kubelet's list, names as
// the runtime records them, fully qualified) and in a NodeImages object (the Berth agent).
// Pods name their images either as users usually write them (short: nginx:1.16) or fully
// qualified (the in-tree plugin's best case).
package imageshare

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/scheduler/rbac"
)

const schedulerName = "share-scheduler"

// Profile is one scheduler configuration under test.
type Profile struct {
	Name     string
	Binary   string
	Profiles string // YAML list under profiles:, schedulerName share-scheduler
}

// DefaultProfiles: the stock kube-scheduler, and berth-scheduler with NodeImageLocality
// replacing ImageLocality among the default plugins at each given weight.
func DefaultProfiles(weights ...int) []Profile {
	out := []Profile{{Name: "kube-scheduler (stock, in-tree ImageLocality)", Binary: cluster.DefaultScheduler, Profiles: "- schedulerName: " + schedulerName + "\n"}}
	for _, w := range weights {
		out = append(out, Profile{Name: fmt.Sprintf("berth-scheduler, NodeImageLocality weight %d", w), Binary: cluster.BerthScheduler,
			Profiles: framework.NodeImageLocalityProfile(schedulerName, w, false, "{}")})
	}
	return out
}

// Options size the run.
type Options struct {
	Nodes, Images, Pods int
	Seed                int64
	Profiles            []Profile
	Logf                func(string, ...any)
}

// Image is one catalogue image.
type Image struct {
	Short, Full string
	Size        int64
	Holders     map[string]bool
}

// Run is one profile on one naming.
type Run struct {
	Profile, Naming string
	Pods, OnHolder  int
}

// Share is OnHolder/Pods.
func (r Run) Share() float64 { return float64(r.OnHolder) / float64(r.Pods) }

// Result is every run plus the inventory.
type Result struct {
	Options Options
	Images  []Image
	Runs    []Run
}

// Execute builds the cluster and inventory and runs every profile on both namings.
func Execute(ctx context.Context, o Options) (*Result, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewSource(o.Seed))
	c, err := cluster.Start(ctx, cluster.Config{WithoutKWOK: true, WithoutDefaultScheduler: true, WithoutControllerManager: true, Logf: o.Logf})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	var names []string
	for i := 0; i < o.Nodes; i++ {
		n := fmt.Sprintf("share-node-%02d", i)
		names = append(names, n)
		if err := c.AddNodes(ctx, cluster.NodeSpec{Name: n, CPU: "16", Memory: "64Gi", Pods: 110}); err != nil {
			return nil, err
		}
	}
	// Mixed sizes from 5 MiB to 3 GiB, each on a random 10-50 % of the nodes.
	sizes := []int64{5, 20, 60, 120, 250, 400, 700, 1000, 1800, 3000}
	res := &Result{Options: o}
	for i := 0; i < o.Images; i++ {
		im := Image{Short: fmt.Sprintf("img%d:1.%d", i, i), Full: fmt.Sprintf("docker.io/library/img%d:1.%d", i, i),
			Size: sizes[i%len(sizes)] << 20, Holders: map[string]bool{}}
		k := o.Nodes/10 + rng.Intn(o.Nodes*4/10+1)
		for _, j := range rng.Perm(o.Nodes)[:k] {
			im.Holders[names[j]] = true
		}
		res.Images = append(res.Images, im)
	}
	if err := publish(ctx, c, names, res.Images); err != nil {
		return nil, err
	}
	if err := ensureSA(ctx, c); err != nil {
		return nil, err
	}
	podImage := make([]int, o.Pods)
	for i := range podImage {
		podImage[i] = rng.Intn(o.Images)
	}
	for _, naming := range []string{"short", "fully-qualified"} {
		for _, p := range o.Profiles {
			run, err := measure(ctx, c, p, naming, res.Images, podImage)
			if err != nil {
				return nil, fmt.Errorf("%s (%s names): %w", p.Name, naming, err)
			}
			o.Logf("%s, %s names: %d/%d on a holder", p.Name, naming, run.OnHolder, run.Pods)
			res.Runs = append(res.Runs, run)
		}
	}
	return res, nil
}

// ensureSA covers clusters without a controller-manager: admission wants the default
// ServiceAccount, and nothing else creates it.
func ensureSA(ctx context.Context, c *cluster.Cluster) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "share"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = c.Client.CoreV1().ServiceAccounts("share").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	return err
}

func publish(ctx context.Context, c *cluster.Cluster, names []string, images []Image) error {
	objs := rbac.SchedulerRBAC(rbac.UserSubject(cluster.SchedulerIdentity.User), "share-imagelocality", "kube-system")
	only := rbac.Objects{ClusterRoles: objs.ClusterRoles}
	for _, b := range objs.ClusterRoleBindings {
		if b.RoleRef.Name == objs.ClusterRoles[0].Name {
			only.ClusterRoleBindings = append(only.ClusterRoleBindings, b)
		}
	}
	if err := rbac.Apply(ctx, c.Client, only); err != nil {
		return err
	}
	if err := framework.InstallNodeImagesCRD(ctx, c.RESTConfig); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	for _, n := range names {
		var inv []framework.NodeImage
		var status []corev1.ContainerImage
		for _, im := range images {
			if im.Holders[n] {
				inv = append(inv, framework.NodeImage{Tags: []string{im.Full}, Size: im.Size})
				status = append(status, corev1.ContainerImage{Names: []string{im.Full}, SizeBytes: im.Size})
			}
		}
		if err := framework.WriteNodeImages(ctx, dyn, n, inv...); err != nil {
			return err
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Images = status
		if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func measure(ctx context.Context, c *cluster.Cluster, p Profile, naming string, images []Image, podImage []int) (Run, error) {
	config := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" +
		"clientConnection: {qps: 5000, burst: 5000}\nleaderElection: {leaderElect: false}\nprofiles:\n" + p.Profiles
	id := cluster.SchedulerIdentity
	sched, err := c.StartScheduler(ctx, cluster.SchedulerOptions{Binary: p.Binary, Name: "share-" + p.Binary, Identity: &id, Config: config})
	if err != nil {
		return Run{}, err
	}
	defer c.StopComponent(sched.Process)
	// Pods arrive one after another, as a stream of deployments would, each seeing the ones
	// before it placed.
	run := Run{Profile: p.Name, Naming: naming, Pods: len(podImage)}
	for i, ii := range podImage {
		ref := images[ii].Short
		if naming != "short" {
			ref = images[ii].Full
		}
		pod := framework.Pod("share", fmt.Sprintf("pod-%04d", i), map[string]string{"share": "yes"}, corev1.PodSpec{
			SchedulerName: schedulerName, TerminationGracePeriodSeconds: new(int64),
			Tolerations: []corev1.Toleration{cluster.SimulatedToleration},
			Containers: []corev1.Container{{Name: "app", Image: ref, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
		})
		if _, err := c.Client.CoreV1().Pods("share").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return Run{}, err
		}
		var node string
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := c.Client.CoreV1().Pods("share").Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			node = got.Spec.NodeName
			return node != "", nil
		})
		if err != nil {
			return Run{}, fmt.Errorf("pod %s not bound: %w\n%s", pod.Name, err, sched.Tail(20))
		}
		if images[ii].Holders[node] {
			run.OnHolder++
		}
	}
	zero := int64(0)
	if err := c.Client.CoreV1().Pods("share").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "share=yes"}); err != nil {
		return Run{}, err
	}
	return run, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods("share").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	})
}

// Print writes the inventory summary and the table of shares.
func (r *Result) Print(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "Placement share: %d nodes, %d images (5 MiB-3 GiB, each on a random 10-50 %% of nodes), %d pods one after another, seed %d\n\n",
		o.Nodes, len(r.Images), o.Pods, o.Seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "image\tsize\tnodes holding it")
	for _, im := range r.Images {
		var hs []string
		for h := range im.Holders {
			hs = append(hs, h)
		}
		sort.Strings(hs)
		fmt.Fprintf(tw, "%s\t%d MiB\t%d\n", im.Full, im.Size>>20, len(hs))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "profile\tpod image names\tpods on a node holding their image\tshare")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.1f %%\n", run.Profile, run.Naming, run.OnHolder, run.Pods, 100*run.Share())
	}
	tw.Flush()
}
