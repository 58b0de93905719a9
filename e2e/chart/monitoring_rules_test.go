package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ruleTests are promtool unit tests of the rules the chart renders with monitoringValues (release
// berth in berth-system, the defaults' thresholds). Each alert has a case where it fires only
// after its `for`, and a look-alike that must not fire (another job, a tolerable ratio, a
// legitimate outcome).
const ruleTests = `
evaluation_interval: 1m
tests:
  # Seconds since the scheduler's last watcher fetch pass 120 at 5m; for 2m.
  - interval: 1m
    input_series:
      - series: 'berth_loadaware_snapshot_age_seconds{job="berth-scheduler-metrics",instance="s1",plugin="TargetLoadPacking"}'
        values: '10 10 10 60 120 180 240 300 360'
      - series: 'berth_loadaware_snapshot_age_seconds{job="berth-scheduler-metrics",instance="s1",plugin="LoadVariationRiskBalancing"}'
        values: '10x8'
      - series: 'berth_loadaware_snapshot_age_seconds{job="other-scheduler",instance="x",plugin="TargetLoadPacking"}'
        values: '1000x8'
    alert_rule_test:
      - {eval_time: 4m, alertname: BerthLoadWatcherUnreachable, exp_alerts: []}
      - {eval_time: 6m, alertname: BerthLoadWatcherUnreachable, exp_alerts: []}
      - eval_time: 7m
        alertname: BerthLoadWatcherUnreachable
        exp_alerts:
          - exp_labels: {severity: warning, job: berth-scheduler-metrics, instance: s1}
            exp_annotations:
              summary: 'berth-scheduler s1 has not read the load watcher for 5m 0s.'
              description: 'Load-aware scores fall back to neutral; pods are placed without real load.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthloadwatcherunreachable

  # Two of three nodes stale or missing from 2m (w1); one of ten (w2) stays under 0.33. for 5m.
  - interval: 1m
    input_series:
      - {series: 'berth_loadwatcher_nodes_fresh{job="berth-loadwatcher-metrics",instance="w1"}', values: '3 3 1x10'}
      - {series: 'berth_loadwatcher_nodes_stale{job="berth-loadwatcher-metrics",instance="w1"}', values: '0 0 1x10'}
      - {series: 'berth_loadwatcher_nodes_missing{job="berth-loadwatcher-metrics",instance="w1"}', values: '0 0 1x10'}
      - {series: 'berth_loadwatcher_nodes_fresh{job="berth-loadwatcher-metrics",instance="w2"}', values: '9x12'}
      - {series: 'berth_loadwatcher_nodes_stale{job="berth-loadwatcher-metrics",instance="w2"}', values: '1x12'}
      - {series: 'berth_loadwatcher_nodes_missing{job="berth-loadwatcher-metrics",instance="w2"}', values: '0x12'}
    alert_rule_test:
      - {eval_time: 6m, alertname: BerthNodesLoadStale, exp_alerts: []}
      - eval_time: 7m
        alertname: BerthNodesLoadStale
        exp_alerts:
          - exp_labels: {severity: warning, job: berth-loadwatcher-metrics, instance: w1}
            exp_annotations:
              summary: '66.67% of nodes have stale or missing load in the load watcher.'
              description: 'Those nodes get the neutral score (or are blocked with expiredMetricsAction Block).'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthnodesloadstale

  # Replica s1 leads until 3m, then no replica does (s2 stays a standby); for 2m. Another
  # scheduler's job leading is irrelevant.
  - interval: 1m
    input_series:
      - {series: 'leader_election_master_status{job="berth-scheduler-metrics",instance="s1",name="kube-scheduler"}', values: '1 1 1 0x10'}
      - {series: 'leader_election_master_status{job="berth-scheduler-metrics",instance="s2",name="kube-scheduler"}', values: '0x13'}
      - {series: 'leader_election_master_status{job="kube-scheduler",instance="k1",name="kube-scheduler"}', values: '1x13'}
    alert_rule_test:
      - {eval_time: 4m, alertname: BerthSchedulerNoLeader, exp_alerts: []}
      - eval_time: 5m
        alertname: BerthSchedulerNoLeader
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: 'No berth-scheduler replica holds Lease berth-system/berth-scheduler.'
              description: 'Pods with schedulerName berth-scheduler are not being scheduled.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthschedulernoleader

  # No replica scraped at all from 2m (the series end): no leader either.
  - interval: 1m
    input_series:
      - {series: 'leader_election_master_status{job="berth-scheduler-metrics",instance="s1",name="kube-scheduler"}', values: '1 1'}
    alert_rule_test:
      - {eval_time: 3m, alertname: BerthSchedulerNoLeader, exp_alerts: []}
      - eval_time: 10m
        alertname: BerthSchedulerNoLeader
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: 'No berth-scheduler replica holds Lease berth-system/berth-scheduler.'
              description: 'Pods with schedulerName berth-scheduler are not being scheduled.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthschedulernoleader

  # Leadership moving from s1 to s2 (both 1 for a scrape, then s2 alone) never fires.
  - interval: 1m
    input_series:
      - {series: 'leader_election_master_status{job="berth-scheduler-metrics",instance="s1",name="kube-scheduler"}', values: '1 1 1 1 0x8'}
      - {series: 'leader_election_master_status{job="berth-scheduler-metrics",instance="s2",name="kube-scheduler"}', values: '0 0 0 1x9'}
    alert_rule_test:
      - {eval_time: 12m, alertname: BerthSchedulerNoLeader, exp_alerts: []}

  # Relief evicting 3 pods a minute from 1m (above 2 a minute once the 10m rate window holds
  # enough of it); for 15m. Dry-run "evictions" and another rebalancer's slow pace do not count.
  - interval: 1m
    input_series:
      - {series: 'berth_rebalancer_evictions_total{job="berth-operator-metrics",instance="o1",rebalancer="berth",result="evicted"}', values: '0 0+3x40'}
      - {series: 'berth_rebalancer_evictions_total{job="berth-operator-metrics",instance="o1",rebalancer="berth",result="dry_run"}', values: '0+10x40'}
      - {series: 'berth_rebalancer_evictions_total{job="berth-operator-metrics",instance="o1",rebalancer="calm",result="evicted"}', values: '0+1x40'}
    alert_rule_test:
      - {eval_time: 15m, alertname: BerthRebalancerEvictionsHigh, exp_alerts: []}
      - eval_time: 30m
        alertname: BerthRebalancerEvictionsHigh
        exp_alerts:
          - exp_labels: {severity: warning, rebalancer: berth}
            exp_annotations:
              summary: 'Rebalancer berth evicts 3.0 pods a minute.'
              description: 'Moved pods keep landing on nodes that turn hot again, or the limits are too loose.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthrebalancerevictionshigh

  # An unschedulable pod from 2m; for 10m. Active-queue pods, gated pods and the stock
  # scheduler's unschedulable pods do not count.
  - interval: 1m
    input_series:
      - {series: 'scheduler_pending_pods{job="berth-scheduler-metrics",instance="s1",queue="unschedulable"}', values: '0 0 1x15'}
      - {series: 'scheduler_pending_pods{job="berth-scheduler-metrics",instance="s1",queue="active"}', values: '5x17'}
      - {series: 'scheduler_pending_pods{job="berth-scheduler-metrics",instance="s1",queue="gated"}', values: '3x17'}
      - {series: 'scheduler_pending_pods{job="kube-scheduler",instance="k1",queue="unschedulable"}', values: '4x17'}
    alert_rule_test:
      - {eval_time: 11m, alertname: BerthSchedulerPodsPending, exp_alerts: []}
      - eval_time: 12m
        alertname: BerthSchedulerPodsPending
        exp_alerts:
          - exp_labels: {severity: warning, job: berth-scheduler-metrics, instance: s1}
            exp_annotations:
              summary: '1 pods for berth-scheduler have been waiting for 10m or longer.'
              description: berth-scheduler could not place them (see the pods' FailedScheduling events).
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthschedulerpodspending

  # One in six webhook answers is bad_request from 6m: the 5m rate passes 5 % at 7m; for 5m.
  - interval: 1m
    input_series:
      - {series: 'berth_isolation_webhook_requests_total{job="berth-operator-metrics",instance="o1",mode="berth",outcome="patched"}', values: '0+60x20'}
      - {series: 'berth_isolation_webhook_requests_total{job="berth-operator-metrics",instance="o1",mode="berth",outcome="bad_request"}', values: '0 0 0 0 0 0+12x15'}
    alert_rule_test:
      - {eval_time: 11m, alertname: BerthIsolationWebhookErrors, exp_alerts: []}
      - eval_time: 12m
        alertname: BerthIsolationWebhookErrors
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: 'The instance-isolation webhook is failing admission requests.'
              description: 'With failurePolicy Fail, classed pods are refused.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthisolationwebhookerrors

  # Refusals are the webhook doing its job, not errors.
  - interval: 1m
    input_series:
      - {series: 'berth_isolation_webhook_requests_total{job="berth-operator-metrics",instance="o1",mode="berth",outcome="refused"}', values: '0+60x20'}
      - {series: 'berth_isolation_webhook_requests_total{job="berth-operator-metrics",instance="o1",mode="berth",outcome="patched"}', values: '0+6x20'}
      - {series: 'apiserver_admission_webhook_rejection_count{name="instance-isolation.berth.dev",error_type="no_error",rejection_code="403",type="admit",operation="CREATE"}', values: '0+60x20'}
    alert_rule_test:
      - {eval_time: 15m, alertname: BerthIsolationWebhookErrors, exp_alerts: []}

  # The API server cannot call the webhook from 1m; for 5m.
  - interval: 1m
    input_series:
      - {series: 'apiserver_admission_webhook_rejection_count{name="instance-isolation.berth.dev",error_type="calling_webhook_error",rejection_code="500",type="admit",operation="CREATE"}', values: '0+3x20'}
    alert_rule_test:
      - {eval_time: 5m, alertname: BerthIsolationWebhookErrors, exp_alerts: []}
      - eval_time: 6m
        alertname: BerthIsolationWebhookErrors
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: 'The instance-isolation webhook is failing admission requests.'
              description: 'With failurePolicy Fail, classed pods are refused.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthisolationwebhookerrors

  # Nine in ten calls take 1-2.5 s from the first minute; for 10m. Another webhook's slowness
  # is not Berth's.
  - interval: 1m
    input_series:
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="instance-isolation.berth.dev",le="0.5"}', values: '0+1x30'}
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="instance-isolation.berth.dev",le="1"}', values: '0+1x30'}
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="instance-isolation.berth.dev",le="2.5"}', values: '0+10x30'}
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="instance-isolation.berth.dev",le="+Inf"}', values: '0+10x30'}
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="other.example.com",le="0.5"}', values: '0x30'}
      - {series: 'apiserver_admission_webhook_admission_duration_seconds_bucket{name="other.example.com",le="+Inf"}', values: '0+10x30'}
    alert_rule_test:
      - {eval_time: 10m, alertname: BerthIsolationWebhookSlow, exp_alerts: []}
      - eval_time: 11m
        alertname: BerthIsolationWebhookSlow
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: 'The instance-isolation webhook''s p99 admission latency is 2.483s.'
              description: 'Past timeoutSeconds (5s) calls fail.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthisolationwebhookslow

  # Two Failed attachments on n1 from 2m; for 10m. Configured ones on n2 are fine.
  - interval: 1m
    input_series:
      - {series: 'berth_agent_podnet_attachments{job="berth-agent-metrics",instance="n1:9101",state="Failed"}', values: '0 0 2x15'}
      - {series: 'berth_agent_podnet_attachments{job="berth-agent-metrics",instance="n1:9101",state="Configured"}', values: '5x17'}
      - {series: 'berth_agent_podnet_attachments{job="berth-agent-metrics",instance="n2:9101",state="Configured"}', values: '7x17'}
    alert_rule_test:
      - {eval_time: 11m, alertname: BerthPodConfigAttachmentsFailing, exp_alerts: []}
      - eval_time: 12m
        alertname: BerthPodConfigAttachmentsFailing
        exp_alerts:
          - exp_labels: {severity: warning, instance: "n1:9101"}
            exp_annotations:
              summary: '2 PodConfig attachments are Failed on n1:9101.'
              description: 'Pods on that node lack the network attachments their PodConfig asks for.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthpodconfigattachmentsfailing

  # n1 fails one report in three from 3m; n2 never fails. for 10m.
  - interval: 1m
    input_series:
      - {series: 'berth_agent_reports_total{job="berth-agent-metrics",instance="n1:9101",outcome="pushed"}', values: '0+4x30'}
      - {series: 'berth_agent_reports_total{job="berth-agent-metrics",instance="n1:9101",outcome="failed"}', values: '0 0 0+2x28'}
      - {series: 'berth_agent_reports_total{job="berth-agent-metrics",instance="n2:9101",outcome="pushed"}', values: '0+4x30'}
    alert_rule_test:
      - {eval_time: 12m, alertname: BerthAgentReportErrors, exp_alerts: []}
      - eval_time: 13m
        alertname: BerthAgentReportErrors
        exp_alerts:
          - exp_labels: {severity: warning, instance: "n1:9101"}
            exp_annotations:
              summary: 'The agent on n1:9101 fails 33.33% of its load reports.'
              description: 'Its node''s load goes stale in the load watcher.'
              runbook_url: https://github.com/berth-sched/berth/blob/main/docs/runbooks.md#berthagentreporterrors
`

// promtool finds Debian's promtool; its absence fails the test (make test's preflight names the
// package too), never skips it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on PATH: the alert unit tests need it (apt-get install -y prometheus, Debian's package ships /usr/bin/promtool)")
	}
	return p
}

// renderedRules returns the chart's PrometheusRule spec (its rule groups) as a promtool rule file.
func renderedRules(t *testing.T) []byte {
	t.Helper()
	r, _ := renderMonitoring(t, "berth", "berth-system", monitoringValues, true)
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			b, err := yaml.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatal("monitoringValues rendered no PrometheusRule")
	return nil
}

func alertNames(rules []byte) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*alert: (\S+)$`).FindAllStringSubmatch(string(rules), -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

func TestMonitoringRulesPromtool(t *testing.T) {
	bin := promtool(t)
	rules := renderedRules(t)
	dir := t.TempDir()
	rulesPath, testsPath := filepath.Join(dir, "berth-rules.yaml"), filepath.Join(dir, "berth-rules-test.yaml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(testsPath, []byte("rule_files: [berth-rules.yaml]\n"+ruleTests), 0o644); err != nil {
		t.Fatal(err)
	}
	// check rules first: a syntax error is clearer there than in the unit-test output.
	if out, err := exec.Command(bin, "check", "rules", rulesPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\nrules:\n%s", err, out, rules)
	}
	cmd := exec.Command(bin, "test", "rules", testsPath)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert the chart renders has a unit test here and a runbook section.
	names := alertNames(rules)
	if len(names) != 9 {
		t.Errorf("alerts rendered %v, want 9", names)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	runbooks, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(ruleTests, "alertname: "+n) {
			t.Errorf("alert %s has no promtool unit test in ruleTests", n)
		}
		if !strings.Contains(string(runbooks), "\n## "+n+"\n") {
			t.Errorf("alert %s has no section \"## %s\" in docs/runbooks.md", n, n)
		}
		if !strings.Contains(string(rules), "runbooks.md#"+strings.ToLower(n)) {
			t.Errorf("alert %s has no runbook_url to its section", n)
		}
	}
}
