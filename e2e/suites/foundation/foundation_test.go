// Package foundation proves berth-scheduler runs as an opt-in second scheduler on the local
// cluster: the real control plane and the real berth-scheduler binary, as processes.
package foundation

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

func TestOptInSecondScheduler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{})
	berth, err := c.StartBerthScheduler(ctx, cluster.BerthSchedulerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddNodes(ctx,
		cluster.NodeSpec{Name: "n1", CPU: "2", Memory: "4Gi"},
		cluster.NodeSpec{Name: "n2", CPU: "2", Memory: "4Gi"}); err != nil {
		t.Fatal(err)
	}
	const ns = "foundation"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("pods are bound by the scheduler they name", func(t *testing.T) {
		cases := []struct {
			pod, schedulerName, wantReporter string
		}{
			{"opted-in", "berth-scheduler", "berth-scheduler"},
			{"default", "", "default-scheduler"},
		}
		for _, tc := range cases {
			pod := framework.Pod(ns, tc.pod, map[string]string{"case": tc.pod}, framework.PodSpec(tc.schedulerName, "100m", "64Mi"))
			created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := framework.WaitPods(ctx, c.Client, ns, "case="+tc.pod, 1, time.Minute, framework.Running); err != nil {
				t.Fatal(err)
			}
			ev, err := framework.WaitSchedulingEvent(ctx, c.Client, created, "Scheduled", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Scheduler != tc.wantReporter {
				t.Errorf("pod %s was bound by %q, want %q (event: %s)", tc.pod, ev.Scheduler, tc.wantReporter, ev.Note)
			}
		}
	})

	t.Run("a pod that fits nowhere stays Pending with berth-scheduler's FailedScheduling", func(t *testing.T) {
		pod := framework.Pod(ns, "too-big", map[string]string{"case": "too-big"}, framework.PodSpec("berth-scheduler", "64", ""))
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := framework.WaitSchedulingEvent(ctx, c.Client, created, "FailedScheduling", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Scheduler != "berth-scheduler" || !strings.Contains(ev.Note, "Insufficient cpu") {
			t.Errorf("FailedScheduling from %q: %q; want berth-scheduler naming Insufficient cpu", ev.Scheduler, ev.Note)
		}
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeName != "" || got.Status.Phase != "Pending" {
			t.Errorf("pod too-big: node %q phase %s, want unbound Pending", got.Spec.NodeName, got.Status.Phase)
		}
	})

	t.Run("berth-scheduler holds its own Lease", func(t *testing.T) {
		lease, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, "berth-scheduler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Errorf("lease berth-scheduler has no holder")
		}
	})

	t.Run("health, readiness and metrics endpoints", func(t *testing.T) {
		base := fmt.Sprintf("https://127.0.0.1:%d", berth.Port)
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, _ := get(t, base+path, ""); code != http.StatusOK {
				t.Errorf("%s answered %d", path, code)
			}
		}
		// /metrics is behind delegated authorization: anonymous is refused, an authorised
		// identity gets the scheduler's metrics.
		if code, _ := get(t, base+"/metrics", ""); code == http.StatusOK {
			t.Errorf("/metrics served without credentials")
		}
		cert, key, err := c.PKI.ClientCert(cluster.AdminIdentity)
		if err != nil {
			t.Fatal(err)
		}
		code, body := getWithCert(t, base+"/metrics", cert, key)
		if code != http.StatusOK || !strings.Contains(body, `scheduler_schedule_attempts_total{profile="berth-scheduler",result="scheduled"}`) {
			t.Errorf("/metrics answered %d without berth-scheduler's scheduling attempts", code)
		}
	})
}

func get(t *testing.T, url, _ string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return do(t, client, url)
}

func getWithCert(t *testing.T, url, certFile, keyFile string) (int, string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
	return do(t, client, url)
}

func do(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
