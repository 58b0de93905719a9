package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// CheckPolicyWrite runs write as subtest name. allowed: it must succeed; else it must be
// refused by a ValidatingAdmissionPolicy whose message contains msg.
func CheckPolicyWrite(t *testing.T, name string, write func() error, allowed bool, msg string) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		err := write()
		if allowed {
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatal("allowed")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			t.Fatalf("refused with %v; want a ValidatingAdmissionPolicy denial saying %q", err, msg)
		}
	})
}

// WaitPoliciesTypeChecked waits until the API server has type-checked each named
// ValidatingAdmissionPolicy against the Pod schema; a warning (an expression it could not
// check, which may fail at admission) is an error.
func WaitPoliciesTypeChecked(ctx context.Context, c kubernetes.Interface, names ...string) error {
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, nil
			}
			if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
				return false, fmt.Errorf("%s: type-checking warnings: %+v", name, w)
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
