package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// JoinSimulatedNodes adds simulated nodes to a running cluster through its API alone (what
// `berth-local add-nodes` does to the cluster `make up` keeps running, whose KWOK manages every
// node carrying KWOKNodeAnnotation) and waits up to timeout until KWOK reports each Ready. A
// node that already exists is an error naming it; nothing is created after the first failure.
func JoinSimulatedNodes(ctx context.Context, cs kubernetes.Interface, specs []NodeSpec, timeout time.Duration) error {
	for _, s := range specs {
		if _, err := cs.CoreV1().Nodes().Create(ctx, NodeObject(s, false), metav1.CreateOptions{}); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("node %s already exists: pick another -prefix", s.Name)
			}
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
	}
	for _, s := range specs {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = "no Ready condition"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					last = string(c.Status) + " " + c.Reason
					return c.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("node %s not Ready after %s (%s): is the cluster's KWOK running? (its log: logs/kwok.log in the cluster's directory)", s.Name, timeout, last)
		}
	}
	return nil
}

// NextNodeNames returns n node names prefix-1, prefix-2, ... skipping every name in existing
// (so a second add-nodes continues where the first stopped).
func NextNodeNames(existing []string, prefix string, n int) []string {
	taken := map[string]bool{}
	for _, e := range existing {
		taken[e] = true
	}
	var out []string
	for i := 1; len(out) < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if !taken[name] {
			out = append(out, name)
		}
	}
	return out
}

// OnlySimulated reports whether every node is one KWOK simulates (no real node beside them),
// as on `berth-local up -simulated`, whose nodes carry no SimulatedTaint. Nodes are named for
// the caller's message.
func OnlySimulated(nodes []corev1.Node) (bool, []string) {
	var real []string
	for _, n := range nodes {
		if n.Annotations[KWOKNodeAnnotation] == "" {
			real = append(real, n.Name)
		}
	}
	sort.Strings(real)
	return len(real) == 0, real
}

// ParseTaint reads key[=value]:Effect as kubectl taint writes it.
func ParseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:Effect (NoSchedule, PreferNoSchedule or NoExecute)", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	return t, nil
}
