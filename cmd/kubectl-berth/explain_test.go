package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/berth-sched/berth/pkg/decisionapi"
)

// seed001 is a record as the scheduler serves it (three scored nodes with TargetLoadPacking
// and SySched details, one refused node), decoded as the CLI decodes every answer.
func seed001(t *testing.T) decisionapi.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed001.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r decisionapi.Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeTable(&b, seed001(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	wantLines := []struct{ prefix, fields string }{
		{"NODE", "NODE FILTER SySched(×1) TargetLoadPacking(×1) TOTAL CHOSEN"},
		{"worker-1", "worker-1 passed 50 (raw 3) 78 128 *"},
		{"worker-3", "worker-3 passed 50 (raw 3) 55 105"},
		{"worker-2", "worker-2 passed 50 (raw 3) 33 83"},
		{"tiny", "tiny NodeResourcesFit: Insufficient cpu - - -"},
	}
	for _, w := range wantLines {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, w.prefix) {
				found = true
				if got := strings.Join(strings.Fields(l), " "); got != w.fields {
					t.Errorf("row %q\nwant %q", got, w.fields)
				}
			}
		}
		if !found {
			t.Errorf("no row %s in\n%s", w.prefix, out)
		}
	}
	for _, want := range []string{
		"Pod demo/empty (uid u1), profile berth-scheduler, attempt 1",
		"Scheduled on worker-1",
		"3 feasible, 1 refused",
		"refused by NodeResourcesFit on 1 node(s): Insufficient cpu",
		"worker-1 TargetLoadPacking: measured 25 % of 8000m; + pod 0m + unreported 0m → 25 % (target 40 %); BerthAgent fresh sample 2s old",
		"worker-1 SySched: ExS 3 = |H∖P| 1 + 1 pods × |H∪P| 12 − Σ|S_q| 10",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// Bad command lines get the usage and exit code 2, without touching any cluster.
func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"describe"}, {"explain"}, {"explain", "deployment", "x"}, {"explain", "pod", "x", "-o", "yaml"}, {"explain", "--bogus"}} {
		var out, errb bytes.Buffer
		code := explainMain(context.Background(), args, &out, &errb)
		if e := errb.String(); code != 2 || out.Len() != 0 || !(strings.Contains(e, "Usage: kubectl berth explain") || strings.Contains(e, "error: --output")) {
			t.Errorf("%v: code %d, stdout %q, stderr %q", args, code, out.String(), e)
		}
	}
}

// The Lease decides the leader; a missing, unheld or expired Lease is an error naming it,
// never a guess.
func TestLeader(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	dur := int32(15)
	holder := "berth-scheduler-6f7c-abcde_1234-5678"
	lease := func(ns string, h *string, renew *metav1.MicroTime) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultLease},
			Spec: coordv1.LeaseSpec{HolderIdentity: h, RenewTime: renew, LeaseDurationSeconds: &dur}}
	}
	empty := ""
	tests := []struct {
		name    string
		objs    []*coordv1.Lease
		ns      string
		wantNS  string
		wantErr string
	}{
		{name: "chart namespace first", objs: []*coordv1.Lease{lease("berth-system", &holder, &now), lease("kube-system", &empty, &now)}, wantNS: "berth-system"},
		{name: "kube-system", objs: []*coordv1.Lease{lease("kube-system", &holder, &now)}, wantNS: "kube-system"},
		{name: "explicit namespace", objs: []*coordv1.Lease{lease("sched", &holder, &now)}, ns: "sched", wantNS: "sched"},
		{name: "missing", wantErr: `no Lease "berth-scheduler" in berth-system or kube-system`},
		{name: "unheld", objs: []*coordv1.Lease{lease("kube-system", &empty, &now)}, wantErr: "has no holder"},
		{name: "expired", objs: []*coordv1.Lease{lease("kube-system", &holder, &old)}, wantErr: "expired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			for _, l := range tc.objs {
				if _, err := c.CoordinationV1().Leases(l.Namespace).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			ns, h, err := CLIOptions{Lease: DefaultLease, SchedulerNamespace: tc.ns}.Scheduler().Leader(context.Background(), c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ns != tc.wantNS || h != holder {
				t.Fatalf("%s %s %v", ns, h, err)
			}
		})
	}
}
