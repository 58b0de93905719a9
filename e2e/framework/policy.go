package framework

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
