package app

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// The default configuration must load and validate exactly as the upstream command will read it.
func TestDefaultConfigLoadsAndValidates(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name        string
		opts        DefaultConfigOptions
		wantElect   bool
		wantQPS     float32
		wantKubecfg string
	}{
		{"defaults", DefaultConfigOptions{}, true, 50, ""},
		{"flags carried over", DefaultConfigOptions{Kubeconfig: "/etc/k/sched.conf", LeaderElect: &no, QPS: 300, Burst: 600}, false, 300, "/etc/k/sched.conf"},
		{"leader election on", DefaultConfigOptions{LeaderElect: &yes}, true, 50, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(DefaultConfig(tc.opts)), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := options.LoadConfigFromFile(klog.Background(), path)
			if err != nil {
				t.Fatalf("upstream cannot load the default config: %v\n%s", err, DefaultConfig(tc.opts))
			}
			if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
				t.Fatalf("invalid: %v", err)
			}
			if len(cfg.Profiles) != 1 || cfg.Profiles[0].SchedulerName != SchedulerName {
				t.Errorf("profiles = %+v, want one named %s", cfg.Profiles, SchedulerName)
			}
			// Decision records are on out of the box (kubectl berth explain).
			if mp := cfg.Profiles[0].Plugins.MultiPoint.Enabled; !containsName(mp, "DecisionRecord") {
				t.Errorf("multiPoint %+v lacks DecisionRecord", mp)
			}
			le := cfg.LeaderElection
			if le.ResourceName != SchedulerName || le.ResourceNamespace != "kube-system" || le.LeaderElect != tc.wantElect {
				t.Errorf("leader election = %+v", le)
			}
			if cfg.ClientConnection.Kubeconfig != tc.wantKubecfg || cfg.ClientConnection.QPS != tc.wantQPS {
				t.Errorf("client connection = %+v", cfg.ClientConnection)
			}
		})
	}
}

func containsName(list []config.Plugin, name string) bool {
	for _, p := range list {
		if p.Name == name {
			return true
		}
	}
	return false
}
