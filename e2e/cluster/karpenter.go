package cluster

// Karpenter in the local cluster: its KWOK provider (bin/karpenter, built by `make tools` from
// tools/karpenter) is a complete Karpenter whose "cloud" creates Node objects carrying
// kwok.x-k8s.io/node=fake, the annotation the cluster's KWOK manages (startKWOK), so its nodes
// turn Ready and run pods like every other simulated node.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// Karpenter names the autoscaler's process, log (logs/karpenter.log) and binary.
const Karpenter = "karpenter"

// KarpenterCRDDir is where `make tools` copies Karpenter's CRDs, under the bin directory.
const KarpenterCRDDir = "karpenter-crds"

// Karpenter's API, read and written unstructured (the e2e module cannot import karpenter: its
// k8s.io versions differ from Berth's).
var (
	NodePoolGVR      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaimGVR     = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	KWOKNodeClassGVR = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// KarpenterNodePoolLabel is set by Karpenter on every NodeClaim and node it makes: the
// NodePool's name.
const KarpenterNodePoolLabel = "karpenter.sh/nodepool"

// DefaultKWOKNodeClass is the KWOKNodeClass StartKarpenter creates, which NodePoolObject refers
// to unless told otherwise.
const DefaultKWOKNodeClass = "berth-kwok"

// KarpenterOptions tune StartKarpenter.
type KarpenterOptions struct {
	// LogLevel is Karpenter's: debug, info (default) or error.
	LogLevel string
	// Env is appended to the process's environment (BATCH_IDLE_DURATION=..., FEATURE_GATES=...).
	Env []string
	// TeardownTimeout bounds the wait, on StopKarpenter and Stop, for Karpenter to delete its
	// NodeClaims and nodes (default 60s); after it their finalizers are dropped and they go.
	TeardownTimeout time.Duration
}

// karpenterState is the running autoscaler (Cluster.karpenter).
type karpenterState struct {
	proc    *Process
	net     *karpenterNet
	timeout time.Duration
	// metricsPort and healthPort are Karpenter's servers; 127.0.0.1:<port> reaches them from
	// the root namespace whichever namespace Karpenter runs in (see karpenter_netns.go).
	metricsPort, healthPort int
}

// StartKarpenter installs Karpenter's CRDs (from bin/karpenter-crds), creates the KWOKNodeClass
// DefaultKWOKNodeClass, and runs bin/karpenter as a process of the cluster until it reports
// ready. Stop (and StopKarpenter) delete every NodeClaim it made, and so its nodes, before
// ending it. NodePools are the caller's (NodePoolObject). Karpenter runs in a network
// namespace (the real nodes', else one of its own) unless the harness is not root: see
// karpenter_netns.go.
func (c *Cluster) StartKarpenter(ctx context.Context, o KarpenterOptions) (*Process, error) {
	c.mu.Lock()
	running := c.karpenter != nil
	c.mu.Unlock()
	if running {
		return nil, &ComponentError{Component: Karpenter, Err: errors.New("already running in this cluster")}
	}
	bin := filepath.Join(c.BinDir, Karpenter)
	if _, err := os.Stat(bin); err != nil {
		return nil, &ComponentError{Component: Karpenter,
			Err: fmt.Errorf("%w at %s: run `make tools` (it builds Karpenter's KWOK provider from tools/karpenter)", ErrMissingBinary, bin)}
	}
	crds, err := LoadKarpenterCRDs(filepath.Join(c.BinDir, KarpenterCRDDir))
	if err != nil {
		return nil, &ComponentError{Component: Karpenter, Err: err}
	}
	if err := InstallCRDs(ctx, c.RESTConfig, crds...); err != nil {
		return nil, &ComponentError{Component: Karpenter, Err: err}
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	if _, err := dyn.Resource(KWOKNodeClassGVR).Create(ctx, KWOKNodeClassObject(DefaultKWOKNodeClass), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, &ComponentError{Component: Karpenter, Err: fmt.Errorf("creating KWOKNodeClass %s: %w", DefaultKWOKNodeClass, err)}
	}
	// why system:masters: Karpenter stands in for a cloud provider here (it creates and deletes
	// Node objects, evicts pods, writes NodeClaims and events cluster-wide), as the cluster's
	// KWOK does; its chart's ClusterRoles grant nearly as much.
	kc, err := c.WriteKubeconfig(Karpenter, Identity{User: "berth-karpenter", Groups: []string{"system:masters"}})
	if err != nil {
		return nil, err
	}
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	healthPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	env := []string{
		"KUBECONFIG=" + kc,
		// One replica beside the cluster: a Lease would only delay the start by its duration.
		"DISABLE_LEADER_ELECTION=true",
		// why free ports: clusters run side by side. Karpenter binds these as ":port" (all
		// interfaces); karpenterNetwork keeps them inside a namespace.
		"METRICS_PORT=" + strconv.Itoa(metricsPort),
		"HEALTH_PROBE_PORT=" + strconv.Itoa(healthPort),
		"LOG_LEVEL=" + level,
		// No instance-types file: the provider's built-in hypothetical types (1 to 256 CPUs).
		"INSTANCE_TYPES_FILE_PATH=",
	}
	env = append(env, o.Env...)
	kn, err := c.karpenterNetwork(metricsPort, healthPort)
	if err != nil {
		return nil, &ComponentError{Component: Karpenter, Err: err}
	}
	// The health port is relayed to the root namespace's loopback by dialing into Karpenter's
	// namespace, so this check passes only when Karpenter answers in there.
	p, err := c.startKarpenterIn(ctx, kn, ProcessSpec{Name: Karpenter, Binary: bin, Env: env},
		httpCheck(nil, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)))
	if err != nil {
		c.stopUnreadyKarpenter()
		return nil, errors.Join(err, kn.close())
	}
	timeout := o.TeardownTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	c.mu.Lock()
	c.karpenter = &karpenterState{proc: p, net: kn, timeout: timeout, metricsPort: metricsPort, healthPort: healthPort}
	c.mu.Unlock()
	return p, nil
}

// StopKarpenter deletes every NodePool and NodeClaim (Karpenter drains and deletes their nodes),
// waits until none and no node of a NodePool is left, then ends Karpenter. A cluster without Karpenter
// returns nil. Whatever does not go within the teardown timeout is removed by force (its
// finalizers dropped) and named in the error.
func (c *Cluster) StopKarpenter(ctx context.Context) error {
	c.mu.Lock()
	k := c.karpenter
	c.karpenter = nil
	c.mu.Unlock()
	if k == nil {
		return nil
	}
	err := c.removeKarpenterNodes(ctx, k.timeout)
	c.StopComponent(k.proc)
	// After the process: its namespace goes with its last user.
	return errors.Join(err, k.net.close())
}

// stopUnreadyKarpenter ends a Karpenter process that started but never became ready (launch
// keeps it among the cluster's processes), so its namespace can go at once.
func (c *Cluster) stopUnreadyKarpenter() {
	for _, p := range c.Processes() {
		if p.Name == Karpenter {
			c.StopComponent(p)
		}
	}
}

// karpenterBeforeStop is StopKarpenter on the way down (Stop): the API server still runs.
func (c *Cluster) karpenterBeforeStop() {
	if err := c.StopKarpenter(context.Background()); err != nil {
		c.cfg.Logf("karpenter teardown: %v", err)
	}
}

func (c *Cluster) removeKarpenterNodes(ctx context.Context, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	// NodePools first: while one exists, Karpenter makes a new NodeClaim for every pod still
	// pending (a test's stranded pods), and the teardown would chase them.
	if err := dyn.Resource(NodePoolGVR).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodePools: %w", err)
	}
	claims := dyn.Resource(NodeClaimGVR)
	deleteClaims := func(ctx context.Context) error {
		if err := claims.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting NodeClaims: %w", err)
		}
		return nil
	}
	if err := deleteClaims(ctx); err != nil {
		return err
	}
	left := func(ctx context.Context) (claimNames, nodeNames []string, err error) {
		l, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		if l != nil {
			for _, it := range l.Items {
				claimNames = append(claimNames, it.GetName())
			}
		}
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KarpenterNodePoolLabel})
		if err != nil {
			return nil, nil, err
		}
		for _, n := range nodes.Items {
			nodeNames = append(nodeNames, n.Name)
		}
		return claimNames, nodeNames, nil
	}
	var lastClaims, lastNodes []string
	werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cl, nl, err := left(ctx)
		if err != nil {
			return false, nil
		}
		lastClaims, lastNodes = cl, nl
		if len(cl) > 0 {
			// One Karpenter made while its NodePool was going is deleted too.
			_ = deleteClaims(ctx)
		}
		return len(cl) == 0 && len(nl) == 0, nil
	})
	if werr == nil {
		return nil
	}
	// Karpenter did not finish (crashed, or a pod it cannot evict): drop the finalizers so the
	// cluster holds nothing of it, and say what was forced.
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	for _, n := range lastClaims {
		_, _ = claims.Patch(ctx, n, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
		_ = claims.Delete(ctx, n, metav1.DeleteOptions{})
	}
	for _, n := range lastNodes {
		_, _ = c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
		_ = c.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
	}
	sort.Strings(lastClaims)
	sort.Strings(lastNodes)
	return fmt.Errorf("Karpenter left NodeClaims %v and nodes %v after %s (removed by force; see logs/karpenter.log)", lastClaims, lastNodes, timeout)
}

// LoadKarpenterCRDs reads every CRD in dir (the YAMLs `make tools` copies from Karpenter's
// module). An empty or missing dir is an error naming the make target that fills it.
func LoadKarpenterCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no Karpenter CRDs in %s: run `make tools` (the $(BIN)/karpenter rule copies them there)", dir)
	}
	sort.Strings(files)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Name == "" {
				continue
			}
			if crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: %s %q is not a CustomResourceDefinition", f, crd.Kind, crd.Name)
			}
			out = append(out, crd)
		}
	}
	return out, nil
}

// KWOKNodeClassObject is a KWOKNodeClass (Karpenter's KWOK provider's node class: it only says
// how long a node takes to register; none is Ready at once).
func KWOKNodeClassObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetAPIVersion(KWOKNodeClassGVR.GroupVersion().String())
	u.SetKind("KWOKNodeClass")
	u.SetName(name)
	return u
}

// NodeClaims lists the names of pool's NodeClaims, sorted.
func NodeClaims(ctx context.Context, dyn dynamic.Interface, pool string) ([]string, error) {
	l, err := dyn.Resource(NodeClaimGVR).List(ctx, metav1.ListOptions{LabelSelector: KarpenterNodePoolLabel + "=" + pool})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range l.Items {
		out = append(out, it.GetName())
	}
	sort.Strings(out)
	return out, nil
}
