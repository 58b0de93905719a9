package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/berth-sched/berth/pkg/berthctl"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// PodConfigs and IPAllocations are read as unstructured objects, and of a PodConfig only its
// metadata and status: the command must keep working for PodConfigs stored under another
// shape of the spec (the API is still changing), and what it needs is there.
var (
	podConfigGVR    = schema.GroupVersionResource{Group: "berth.dev", Version: "v1alpha1", Resource: "podconfigs"}
	ipAllocationGVR = schema.GroupVersionResource{Group: "berth.dev", Version: "v1alpha1", Resource: "ipallocations"}
)

// podConfigFinalizer is what the operator holds a PodConfig by (api/v1alpha1.PodConfigFinalizer).
const podConfigFinalizer = "berth.dev/podconfig"

const podConfigUsage = `Usage: kubectl berth podconfig release NAMESPACE/NAME [flags]

For when the Berth operator is gone (scaled to 0, crashed, uninstalled without its hook): a
PodConfig being deleted (e.g. with its namespace) keeps its finalizer berth.dev/podconfig until
an operator removes it, so it and its namespace never go. release does the operator's part for
one PodConfig, only if none of its pods is still running (their links would stay): it frees the
PodConfig's addresses in the IPAllocations and removes the finalizer. It refuses a PodConfig
that is not being deleted, and names the pods still running. See pkg/podconfig/README.md,
"When the operator is gone".

Flags:
`

// podConfigMain runs `kubectl berth podconfig ARGS` and returns the exit code.
func podConfigMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kubectl berth podconfig", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context to use")
	timeout := fs.Duration("request-timeout", 30*time.Second, "time limit for the whole command")
	fs.Usage = func() { fmt.Fprint(stderr, podConfigUsage); fs.PrintDefaults() }
	if code, ok := berthctl.ParseFlags(fs, args, stderr); !ok {
		return code
	}
	pos := fs.Args()
	if len(pos) != 2 || pos[0] != "release" {
		fs.Usage()
		return 2
	}
	ns, name, ok := strings.Cut(pos[1], "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		fmt.Fprintf(stderr, "error: NAMESPACE/NAME: %q is not a PodConfig's namespace/name\n", pos[1])
		return 2
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *kubeContext}).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "error: kubeconfig: %v\n", err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	msg, err := ReleasePodConfig(ctx, dyn, cs, ns, name)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, msg)
	return 0
}

// RunningPodsError names the PodConfig's pods that still run: releasing it now would leave
// their links on the nodes with nobody to remove them.
type RunningPodsError struct {
	PodConfig string
	Pods      []string // namespace/name (node, phase)
}

func (e *RunningPodsError) Error() string {
	return fmt.Sprintf("PodConfig %s not released: its pods still run and hold its links: %s (delete them, or wait until their node's "+
		"kubelet has stopped them, then run this again)", e.PodConfig, strings.Join(e.Pods, ", "))
}

// ReleasePodConfig does what the operator does at the end of a PodConfig's deletion, for a
// PodConfig whose operator is gone: once none of the pods in its status still runs (a pod's
// host-side veth ends go with its network namespace), it frees every address the PodConfig
// holds in the IPAllocations and removes the berth.dev/podconfig finalizer. It refuses a
// PodConfig that is not being deleted (an operator would only add the finalizer again) and
// names the pods still running. Every write is guarded by resourceVersion; a conflict is
// re-read and retried.
func ReleasePodConfig(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, ns, name string) (string, error) {
	key := ns + "/" + name
	pcs := dyn.Resource(podConfigGVR).Namespace(ns)
	pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("PodConfig %s not found", key)
	}
	if err != nil {
		return "", fmt.Errorf("reading PodConfig %s: %w", key, err)
	}
	if !slices.Contains(pc.GetFinalizers(), podConfigFinalizer) {
		return fmt.Sprintf("PodConfig %s holds no %s finalizer: nothing to release", key, podConfigFinalizer), nil
	}
	if pc.GetDeletionTimestamp() == nil {
		return "", fmt.Errorf("PodConfig %s is not being deleted: delete it first (kubectl -n %s delete podconfig %s --wait=false); "+
			"a running operator would add the finalizer again", key, ns, name)
	}
	running, err := runningPods(ctx, cs, pc)
	if err != nil {
		return "", err
	}
	if len(running) > 0 {
		return "", &RunningPodsError{PodConfig: key, Pods: running}
	}
	freed, err := freeAddresses(ctx, dyn, ns, name)
	if err != nil {
		return "", err
	}
	if err := removeFinalizer(ctx, pcs, name); err != nil {
		return "", err
	}
	what := "no address held"
	if len(freed) > 0 {
		what = "freed " + strings.Join(freed, ", ")
	}
	return fmt.Sprintf("PodConfig %s released: no pod of it runs, %s, finalizer %s removed", key, what, podConfigFinalizer), nil
}

// runningPods lists the pods named in the PodConfig's status entries that still exist as the
// same pod (same UID, where the entry has one) and have not terminated.
func runningPods(ctx context.Context, cs kubernetes.Interface, pc *unstructured.Unstructured) ([]string, error) {
	entries, _, err := unstructured.NestedSlice(pc.Object, "status", "pods")
	if err != nil {
		return nil, fmt.Errorf("PodConfig %s/%s: status.pods: %w", pc.GetNamespace(), pc.GetName(), err)
	}
	uids := map[string]map[string]bool{} // pod name -> UIDs its entries name ("" = none)
	for _, raw := range entries {
		e, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		pod, _ := e["pod"].(string)
		if pod == "" {
			continue
		}
		if uids[pod] == nil {
			uids[pod] = map[string]bool{}
		}
		uid, _ := e["podUID"].(string)
		uids[pod][uid] = true
	}
	var out []string
	for pod, want := range uids {
		p, err := cs.CoreV1().Pods(pc.GetNamespace()).Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading pod %s/%s: %w", pc.GetNamespace(), pod, err)
		}
		if !want[""] && !want[string(p.UID)] {
			continue // another pod under the same name: never attached by this PodConfig
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		node := p.Spec.NodeName
		if node == "" {
			node = "no node"
		}
		out = append(out, fmt.Sprintf("%s/%s (on %s, %s)", p.Namespace, p.Name, node, p.Status.Phase))
	}
	sort.Strings(out)
	return out, nil
}

// freeAddresses removes the PodConfig's allocations from every IPAllocation and returns what
// it freed ("<address> in <IPAllocation>").
func freeAddresses(ctx context.Context, dyn dynamic.Interface, ns, name string) ([]string, error) {
	pools := dyn.Resource(ipAllocationGVR)
	list, err := pools.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // no IPAllocation kind served: nothing can be held
	}
	if err != nil {
		return nil, fmt.Errorf("listing IPAllocations: %w", err)
	}
	var freed []string
	for _, item := range list.Items {
		poolName := item.GetName()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pool, err := pools.Get(ctx, poolName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			allocs, _, err := unstructured.NestedSlice(pool.Object, "spec", "allocations")
			if err != nil {
				return fmt.Errorf("IPAllocation %s: spec.allocations: %w", poolName, err)
			}
			var keep []any
			var mine []string
			for _, raw := range allocs {
				a, _ := raw.(map[string]any)
				if a != nil && a["podNamespace"] == ns && a["podConfig"] == name {
					mine = append(mine, fmt.Sprintf("%v in %s", a["address"], poolName))
					continue
				}
				keep = append(keep, raw)
			}
			if len(mine) == 0 {
				return nil
			}
			if err := unstructured.SetNestedSlice(pool.Object, keep, "spec", "allocations"); err != nil {
				return err
			}
			// The operator keeps status.used with the allocations it counts (no status subresource).
			if _, found, _ := unstructured.NestedFieldNoCopy(pool.Object, "status", "used"); found {
				_ = unstructured.SetNestedField(pool.Object, int64(len(keep)), "status", "used")
			}
			if _, err := pools.Update(ctx, pool, metav1.UpdateOptions{}); err != nil {
				return err
			}
			freed = append(freed, mine...)
			return nil
		})
		if err != nil {
			return freed, fmt.Errorf("freeing PodConfig %s/%s's addresses in IPAllocation %s: %w", ns, name, poolName, err)
		}
	}
	return freed, nil
}

// removeFinalizer drops the operator's finalizer, keeping any other, guarded by
// resourceVersion (a merge patch replaces the whole list).
func removeFinalizer(ctx context.Context, pcs dynamic.ResourceInterface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		rest := slices.DeleteFunc(slices.Clone(pc.GetFinalizers()), func(f string) bool { return f == podConfigFinalizer })
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pc.GetResourceVersion(), "finalizers": rest}})
		if err != nil {
			return err
		}
		_, err = pcs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}
