package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestRealNodeConfigRendering(t *testing.T) {
	p := newRealNodePaths("/tmp/c1")
	t.Run("containerd keeps everything under the node dir", func(t *testing.T) {
		got := containerdConfig(p, PauseImage)
		for _, want := range []string{
			`root = "/tmp/c1/node/containerd/root"`, `state = "/tmp/c1/node/containerd/state"`,
			`address = "/tmp/c1/node/containerd/containerd.sock"`, `restrict_oom_score_adj = true`,
			`netns_mounts_under_state_dir = true`, `sandbox_image = "registry.k8s.io/pause:3.10.1"`,
			`bin_dir = "/tmp/c1/node/cni/bin"`, `conf_dir = "/tmp/c1/node/cni/net.d"`,
			`Root = "/tmp/c1/node/containerd/runc"`, `SystemdCgroup = false`, `path = "/tmp/c1/node/containerd/opt"`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("containerd config lacks %s:\n%s", want, got)
			}
		}
	})
	t.Run("CNI: no gateway mode, no masquerade, bridge and IPAM inside the node", func(t *testing.T) {
		s, err := cniConfig("berth-x", p, nodeAddrs(0))
		if err != nil {
			t.Fatal(err)
		}
		var conf struct {
			Name    string           `json:"name"`
			Plugins []map[string]any `json:"plugins"`
		}
		if err := json.Unmarshal([]byte(s), &conf); err != nil {
			t.Fatal(err)
		}
		if conf.Name != "berth-x" || len(conf.Plugins) != 2 {
			t.Fatalf("conf %+v", conf)
		}
		br := conf.Plugins[0]
		ipam, _ := br["ipam"].(map[string]any)
		cases := map[string]any{"type": "bridge", "bridge": RealNodeBridge, "isGateway": false, "ipMasq": false}
		for k, want := range cases {
			if br[k] != want {
				t.Errorf("bridge %s = %v, want %v", k, br[k], want)
			}
		}
		if ipam["dataDir"] != "/tmp/c1/node/cni/ipam" || ipam["type"] != "host-local" {
			t.Errorf("ipam %v", ipam)
		}
		if conf.Plugins[1]["type"] != "portmap" {
			t.Errorf("second plugin %v, want portmap", conf.Plugins[1])
		}
	})
	t.Run("kubelet", func(t *testing.T) {
		var kc map[string]any
		if err := yaml.Unmarshal([]byte(kubeletConfig(p, nodeAddrs(0), "/tmp/c1/pki/ca.crt", "/berth-ab")), &kc); err != nil {
			t.Fatal(err)
		}
		cases := map[string]any{
			"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": "/berth-ab", "failSwapOn": false,
			"resolvConf": "/tmp/c1/node/resolv.conf", "imageGCHighThresholdPercent": float64(100),
			"containerRuntimeEndpoint": "unix:///tmp/c1/node/containerd/containerd.sock", "address": RealNodeIP,
			"podLogsDir": "/tmp/c1/node/pod-logs", "volumePluginDir": "/tmp/c1/node/volume-plugins", "readOnlyPort": float64(0),
		}
		for k, want := range cases {
			if kc[k] != want {
				t.Errorf("kubelet %s = %v (%T), want %v", k, kc[k], kc[k], want)
			}
		}
		auth, _ := kc["authentication"].(map[string]any)
		anon, _ := auth["anonymous"].(map[string]any)
		if anon["enabled"] != false {
			t.Errorf("anonymous kubelet access not disabled: %v", auth)
		}
		if resolvConf(nodeAddrs(0)) != "nameserver "+RealNodeIP+"\n" {
			t.Errorf("resolv.conf %q", resolvConf(nodeAddrs(0)))
		}
	})
	t.Run("kube-proxy", func(t *testing.T) {
		var pc map[string]any
		if err := yaml.Unmarshal([]byte(kubeProxyConfig("/tmp/c1/kube-proxy.kubeconfig", "n1", nodeAddrs(0))), &pc); err != nil {
			t.Fatal(err)
		}
		if pc["mode"] != "iptables" || pc["hostnameOverride"] != "n1" {
			t.Errorf("mode/hostname: %v", pc)
		}
		if npa, _ := pc["nodePortAddresses"].([]any); len(npa) != 1 || npa[0] != RealNodeSubnet {
			t.Errorf("nodePortAddresses %v, want only %s", pc["nodePortAddresses"], RealNodeSubnet)
		}
		ipt, _ := pc["iptables"].(map[string]any)
		if ipt["localhostNodePorts"] != false {
			t.Errorf("localhostNodePorts must be off (it needs route_localnet): %v", ipt)
		}
	})
}

func TestNodeAddrs(t *testing.T) {
	cases := []struct {
		i                                  int
		ip, subnet, first, linkIP, linkDev string
	}{
		// The first node keeps the addresses suites know (RealNodeIP on RealNodeSubnet) and
		// owns the link bridge; the others sit on it by their uplink.
		{0, RealNodeIP, RealNodeSubnet, "10.244.0.10", "10.243.0.1", NodeLinkBridge},
		{1, "10.244.1.1", "10.244.1.0/24", "10.244.1.10", "10.243.0.2", NodeUplink},
		{MaxRealNodes - 1, "10.244.7.1", "10.244.7.0/24", "10.244.7.10", "10.243.0.8", NodeUplink},
	}
	pods := mustCIDR(t, RealPodCIDR)
	link := mustCIDR(t, NodeLinkSubnet)
	kwok := mustCIDR(t, "10.244.128.0/17")
	for _, tc := range cases {
		a := nodeAddrs(tc.i)
		if a.IP != tc.ip || a.Subnet != tc.subnet || a.First != tc.first || a.LinkIP != tc.linkIP || a.LinkDev != tc.linkDev {
			t.Errorf("node %d: %+v", tc.i, a)
		}
		sub := mustCIDR(t, a.Subnet)
		if !pods.Contains(sub.IP) || kwok.Contains(sub.IP) || !link.Contains(net.ParseIP(a.LinkIP)) {
			t.Errorf("node %d: subnet %s outside %s or inside KWOK's, or link %s outside %s", tc.i, a.Subnet, RealPodCIDR, a.LinkIP, NodeLinkSubnet)
		}
	}
	if realNodeName("n", 0) != "n" || realNodeName("n", 2) != "n-3" {
		t.Errorf("names %q %q", realNodeName("n", 0), realNodeName("n", 2))
	}
	if (&RealNode{Index: 0}).componentName(Kubelet) != Kubelet || (&RealNode{Index: 1, NodeName: "n-2"}).componentName(Kubelet) != "kubelet-n-2" {
		t.Error("component names: the first node's are bare, the others' carry the node name")
	}
}

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRealNodeCountRefused(t *testing.T) {
	for _, n := range []int{-1, MaxRealNodes + 1} {
		var started int
		_, err := Start(context.Background(), Config{RealNode: &RealNodeConfig{Count: n}, OnProcess: func(*Process) { started++ }})
		if !errors.Is(err, ErrRealNodeUnavailable) || !strings.Contains(err.Error(), "real nodes asked for") || started != 0 {
			t.Errorf("count %d: want a refusal before anything starts, got %v (%d started)", n, err, started)
		}
	}
}

func TestLoopbackPorts(t *testing.T) {
	cases := []struct {
		args []string
		want []int
	}{
		{[]string{"--listen-client-urls=http://127.0.0.1:2379", "--initial-cluster=b=http://127.0.0.1:2380"}, []int{2379, 2380}},
		{[]string{"--bind-address=127.0.0.1", "--secure-port=6443"}, []int{6443}},
		{[]string{"--server-address=127.0.0.1:9000", "--etcd-servers=http://127.0.0.1:9000"}, []int{9000}},
		{[]string{"--listen=10.0.0.1:80", "--port=x", "--v=2"}, nil},
		{[]string{"--metrics=localhost:8080"}, []int{8080}},
	}
	for _, tc := range cases {
		got := loopbackPorts(tc.args)
		if len(got) != len(tc.want) {
			t.Errorf("%v: got %v, want %v", tc.args, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v: got %v, want %v", tc.args, got, tc.want)
			}
		}
	}
}

func TestParseMountInfo(t *testing.T) {
	cases := []struct {
		line string
		want Mount
		ok   bool
	}{
		{"36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			Mount{Point: "/mnt/with space", FSType: "ext3", Super: "rw,errors=continue"}, true},
		{"30 25 0:26 / /sys/fs/cgroup/cpuset rw,nosuid shared:9 - cgroup cgroup rw,cpuset",
			Mount{Point: "/sys/fs/cgroup/cpuset", FSType: "cgroup", Super: "rw,cpuset"}, true},
		{"garbage", Mount{}, false},
	}
	for _, tc := range cases {
		got, ok := parseMountInfo(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: got %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestValidNodeName(t *testing.T) {
	for name, want := range map[string]bool{"berth-real": true, "n1.example": true, "": false, "Upper": false, "-x": false, "a_b": false} {
		if got := validNodeName(name); got != want {
			t.Errorf("validNodeName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestShimSocketPath(t *testing.T) {
	// containerd 1.6: sha256 of address/namespace/id under /run/containerd/s.
	got := shimSocket("/a/containerd.sock", "k8s.io", "abc")
	if !strings.HasPrefix(got, "/run/containerd/s/") || len(got) != len("/run/containerd/s/")+64 {
		t.Errorf("shim socket %q", got)
	}
	if got == shimSocket("/a/containerd.sock", "k8s.io", "abd") {
		t.Error("different ids share a socket")
	}
}

func TestRealNodeRefusesMissingTools(t *testing.T) {
	// Whether or not this runs as root, a missing CNI plugin is named with the apt fix, and
	// nothing starts.
	old := CNIPluginDir
	CNIPluginDir = t.TempDir()
	defer func() { CNIPluginDir = old }()
	var started int
	_, err := Start(context.Background(), Config{RealNode: &RealNodeConfig{}, OnProcess: func(*Process) { started++ }})
	if !errors.Is(err, ErrRealNodeUnavailable) || !strings.Contains(err.Error(), "CNI plugin "+CNIPluginDir+"/bridge") ||
		!strings.Contains(err.Error(), RealNodePackages) {
		t.Fatalf("want a missing-CNI error with the apt fix, got %v", err)
	}
	if started != 0 {
		t.Errorf("%d processes started before refusing", started)
	}
}

func TestRealNodeHostLockSerialises(t *testing.T) {
	old := realNodeLockPath
	realNodeLockPath = filepath.Join(t.TempDir(), "lock")
	t.Cleanup(func() { realNodeLockPath = old })
	first, err := lockHost(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := lockHost(300 * time.Millisecond); err == nil {
		second.Close()
		t.Fatal("a second real node got the host while the first held it")
	} else if !errors.Is(err, ErrRealNodeUnavailable) {
		t.Fatalf("want ErrRealNodeUnavailable, got %v", err)
	}
	first.Close()
	again, err := lockHost(time.Second)
	if err != nil {
		t.Fatalf("lock not released by the first node: %v", err)
	}
	again.Close()
}
