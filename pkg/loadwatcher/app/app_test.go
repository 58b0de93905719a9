package app

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestValidateRefusesBadFlagsBeforeConnecting(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults are valid", nil, ""},
		{"prometheus with a URL", []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090"}, ""},
		{"metrics-server", []string{"--source=metrics-server"}, ""},
		{"unknown source", []string{"--source=graphite"}, `--source="graphite"`},
		{"prometheus without a URL", []string{"--source=prometheus"}, "--prometheus-url is required"},
		{"no agent account", []string{"--agent-service-account="}, "at least one namespace/name"},
		{"account without namespace", []string{"--agent-service-account=berth-agent"}, `"berth-agent" is not namespace/name`},
		{"zero staleness", []string{"--stale-after=0s"}, "--stale-after=0s"},
		{"zero API QPS", []string{"--kube-api-qps=0"}, "--kube-api-qps=0: must be positive"},
		{"negative API burst", []string{"--kube-api-burst=-1"}, "--kube-api-burst=-1"},
		{"zero poll interval", []string{"--source=metrics-server", "--poll-interval=0s"}, "--poll-interval=0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	var o Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.AddFlags(fs)
	if o.Source != "agent" || o.StaleAfter != 5*time.Minute || o.ServiceAccounts != "berth-system/berth-agent" ||
		o.APIQPS != 100 || o.APIBurst != 200 {
		t.Errorf("defaults changed: %+v", o)
	}
}
