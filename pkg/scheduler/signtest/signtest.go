// Package signtest helps the tests of Berth's SignPlugins.
package signtest

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Signature is pl's one signature fragment for p, as JSON so fragments compare with ==. It fails
// the test unless pl signs p with exactly one fragment under key.
func Signature(t testing.TB, pl fwk.SignPlugin, key string, p *v1.Pod) string {
	t.Helper()
	f, st := pl.SignPod(context.Background(), p)
	if !st.IsSuccess() || len(f) != 1 || f[0].Key != key {
		t.Fatalf("SignPod(%s) = %v %v", p.Name, f, st)
	}
	b, err := json.Marshal(f[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
