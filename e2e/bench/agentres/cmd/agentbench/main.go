// Command agentbench prints berth-agent's resident memory and CPU use over a run (default 60 s
// sampled every 1 s) on a fixture /proc, pushing reports to a loopback sink.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/berth-sched/berth/e2e/bench/agentres"
	"github.com/berth-sched/berth/e2e/cluster"
)

func main() {
	o := agentres.Options{}
	bin := flag.String("agent", "", "berth-agent binary (default bin/berth-agent of the repository)")
	flag.DurationVar(&o.Duration, "duration", 60*time.Second, "how long to measure")
	flag.DurationVar(&o.Interval, "interval", time.Second, "harness sampling period")
	flag.DurationVar(&o.SampleInterval, "sample-interval", time.Second, "agent --sample-interval")
	flag.DurationVar(&o.ReportInterval, "report-interval", 15*time.Second, "agent --report-interval")
	flag.Float64Var(&o.CPU, "cpu", 25, "fixture CPU utilisation percent")
	flag.Float64Var(&o.Memory, "memory", 60, "fixture memory utilisation percent")
	flag.Parse()
	if *bin == "" {
		dir, err := cluster.ResolveBinDir("")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*bin = filepath.Join(dir, "berth-agent")
	}
	o.Binary = *bin
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := agentres.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
	s, err := agentres.Summarize(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
	fmt.Printf("berth-agent, fixture /proc, --watch-pods=false, --sample-interval=%s --report-interval=%s, %d samples every %s over %s\n",
		o.SampleInterval, o.ReportInterval, len(res.Samples), o.Interval, s.Span.Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RSS MIN MiB\tRSS AVG MiB\tRSS MAX MiB\tCPU s\tCPU % (avg, 1 core)\tCPU % (busiest 1 s)\tREPORTS")
	fmt.Fprintf(tw, "%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.1f\t%d\n", float64(s.RSSMinKiB)/1024, s.RSSAvgKiB/1024, float64(s.RSSMaxKiB)/1024,
		s.CPUSeconds, s.CPUPercent, s.CPUPercentMaxInterval, res.Reports)
	_ = tw.Flush()
}
