package autoscale

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/berth-sched/berth/e2e/bench"
	"github.com/berth-sched/berth/e2e/cluster"
)

// `make bench-autoscale` (issue 37): classes × pods per class arrive at once on an empty
// isolation pool that Karpenter grows, once per arm and round, each arm on a fresh cluster (the
// same starting state: no pool node, no pod), arms alternating within a round.
var (
	benchClasses = flag.Int("autoscale.classes", classes, "bench-autoscale: instance classes arriving at once")
	benchPods    = flag.Int("autoscale.pods", podsPerClass, "bench-autoscale: pods per class")
	benchRounds  = flag.Int("autoscale.rounds", 3, "bench-autoscale: rounds (every arm once per round)")
	benchOnly    = flag.String("autoscale.arms", "", "bench-autoscale: run only the arms whose name contains this")
)

// benchArm is one way to isolate classes: the webhook's mode and whether it writes the marker.
type benchArm struct {
	name   string
	mode   string
	marker bool
}

var benchArms = []benchArm{
	{"berth + marker", "berth", true},
	{"both", "both", false},
	{"ipp (stock scheduler)", "ipp", false},
}

// armResult is what one arm did in one round, read back from the API server and /proc.
type armResult struct {
	toRunning              time.Duration
	claims, pending        int
	violations, antiAff    int
	schedCPU, karpenterCPU time.Duration
	pods                   int
}

func BenchmarkAutoscale(b *testing.B) {
	results := map[string][]armResult{}
	for round := 1; round <= *benchRounds; round++ {
		for _, a := range benchArms {
			if !strings.Contains(a.name, *benchOnly) {
				continue
			}
			b.Run(fmt.Sprintf("round%d/%s", round, strings.Fields(a.name)[0]), func(b *testing.B) {
				results[a.name] = append(results[a.name], runArm(b, a))
			})
		}
	}
	printAutoscaleTable(os.Stdout, results)
}

// runArm starts a fresh cluster for a, creates the classes' pods at once and measures until
// every pod runs (or the scale-up timeout), then reads what happened.
func runArm(b *testing.B, a benchArm) armResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := start(ctx, b, a.mode, a.marker)
	sched := e.schedulerProcess(a.mode)
	karp := processNamed(e.c, cluster.Karpenter)
	cpu0, kcpu0 := procCPU(b, sched), procCPU(b, karp)
	t0 := time.Now()
	total := *benchClasses * *benchPods
	for i := 0; i < *benchClasses; i++ {
		for j := 0; j < *benchPods; j++ {
			if _, err := e.c.Client.CoreV1().Pods(tenantNS).Create(ctx, classPod(fmt.Sprintf("%s-%d", className(i), j), className(i)), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var r armResult
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, scaleUpTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.read(ctx)
		if err != nil {
			return false, nil
		}
		running := 0
		for _, pod := range p.pods {
			if pod.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == total, nil
	})
	r.toRunning = time.Since(t0)
	if r.toRunning > time.Minute {
		b.Logf("%s: slow to all Running (%s); karpenter log tail:\n%s\nscheduler log tail:\n%s", a.name, r.toRunning,
			karp.Tail(30), sched.Tail(30))
	}
	r.schedCPU, r.karpenterCPU = procCPU(b, sched)-cpu0, procCPU(b, karp)-kcpu0
	p, err := e.read(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r.pods = total
	for _, pod := range p.pods {
		if pod.Status.Phase != corev1.PodRunning {
			r.pending++
		}
		if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			r.antiAff++
		}
	}
	for _, cls := range p.classes {
		if len(cls) > 1 {
			r.violations++
		}
	}
	claims, err := cluster.NodeClaims(ctx, e.dyn, nodePool)
	if err != nil {
		b.Fatal(err)
	}
	r.claims = len(claims)
	if r.pending > 0 {
		r.toRunning = 0 // not all Running: no time to all Running
	}
	return r
}

// schedulerProcess is the process that places the classed pods: berth-scheduler, or in mode
// ipp the cluster's stock kube-scheduler.
func (e *env) schedulerProcess(mode string) *cluster.Process {
	if mode == "ipp" {
		return processNamed(e.c, "kube-scheduler")
	}
	return processNamed(e.c, "berth-scheduler")
}

func processNamed(c *cluster.Cluster, name string) *cluster.Process {
	for _, p := range c.Processes() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func procCPU(b *testing.B, p *cluster.Process) time.Duration {
	if p == nil {
		b.Fatal("a process the bench measures is not running")
	}
	d, err := bench.ProcessCPU(p.PID())
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// printAutoscaleTable prints one row per arm: medians over rounds with [min–max].
func printAutoscaleTable(out *os.File, results map[string][]armResult) {
	fmt.Fprintf(out, "\nbench-autoscale: %d classes × %d pods arriving at once on an empty Karpenter pool, %d rounds, a fresh cluster per arm and round\n",
		*benchClasses, *benchPods, *benchRounds)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ARM\tTO ALL RUNNING s\tNODECLAIMS\tPENDING\tSHARED NODES\tPODS WITH ANTI-AFFINITY\tSCHEDULER CPU ms/pod\tKARPENTER CPU ms/pod")
	for _, a := range benchArms {
		rs := results[a.name]
		if len(rs) == 0 {
			continue
		}
		col := func(f func(armResult) float64) string {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return fmt.Sprintf("%.1f [%.1f–%.1f]", v[len(v)/2], v[0], v[len(v)-1])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.name,
			col(func(r armResult) float64 { return r.toRunning.Seconds() }),
			col(func(r armResult) float64 { return float64(r.claims) }),
			col(func(r armResult) float64 { return float64(r.pending) }),
			col(func(r armResult) float64 { return float64(r.violations) }),
			col(func(r armResult) float64 { return float64(r.antiAff) }),
			col(func(r armResult) float64 { return float64(r.schedCPU.Milliseconds()) / float64(r.pods) }),
			col(func(r armResult) float64 { return float64(r.karpenterCPU.Milliseconds()) / float64(r.pods) }))
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "TO ALL RUNNING 0 = not every pod Running within the scale-up timeout (see PENDING).")
}
