package cluster

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestKarpenterPlacement(t *testing.T) {
	tests := []struct {
		name    string
		host    karpenterHost
		want    karpenterPlace
		whyHas  string
		whyNone bool
	}{
		{"real nodes' namespace", karpenterHost{clusterNS: true, root: true}, karpenterClusterNS, "", true},
		{"real nodes' namespace wins over a missing tool", karpenterHost{clusterNS: true, root: true, missing: "ip"}, karpenterClusterNS, "", true},
		{"root makes its own", karpenterHost{root: true}, karpenterOwnNS, "", true},
		{"not root", karpenterHost{}, karpenterRootNS, "not running as root", false},
		{"not root, detached", karpenterHost{detach: true}, karpenterRootNS, "not running as root", false},
		{"root but detached", karpenterHost{root: true, detach: true}, karpenterRootNS, "detached", false},
		{"root without nsenter", karpenterHost{root: true, missing: "nsenter"}, karpenterRootNS, "nsenter is not installed", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := placeKarpenter(tc.host)
			if got != tc.want {
				t.Errorf("place = %d, want %d", got, tc.want)
			}
			if tc.whyNone != (why == "") || !strings.Contains(why, tc.whyHas) {
				t.Errorf("why = %q, want it to say %q (empty: %v)", why, tc.whyHas, tc.whyNone)
			}
		})
	}
}

// TestKarpenterListensOnlyInItsNamespace: as root, Karpenter runs in a network namespace of its
// own, so nothing in the root namespace listens on its metrics or health port except the
// harness's loopback relays, which reach it; StopKarpenter leaves no mount, file or relay.
func TestKarpenterListensOnlyInItsNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		// why not a plain skip: make test runs as root (.ci/run does), and this is the only
		// proof of where Karpenter listens; only the reduced run of hack/preflight.sh leaves it
		// out, as framework.NeedRealNode does (framework imports this package, so not called).
		if os.Getenv("BERTH_SKIP_REAL_NODE") == "1" {
			t.Skip("SKIPPED: BERTH_SKIP_REAL_NODE=1 leaves out the tests that need root; unset it for the full run")
		}
		t.Fatal("needs root: without it Karpenter runs in the root namespace (see karpenter_netns.go); run as root, or set BERTH_SKIP_REAL_NODE=1 for the reduced run")
	}
	// The scanner must see a wildcard listener, or the assertions below could not fail.
	probe, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	probePort := probe.Addr().(*net.TCPAddr).Port
	if open := openListeners(t, probePort); len(open) == 0 {
		t.Fatalf("the /proc/net scanner missed a listener on :%d", probePort)
	}
	probe.Close()

	c, _ := startKarpenterCluster(t)
	c.mu.Lock()
	k := c.karpenter
	c.mu.Unlock()
	if k.net.place != karpenterOwnNS {
		t.Fatalf("Karpenter placed %d, want its own namespace", k.net.place)
	}
	ports := []int{k.metricsPort, k.healthPort}
	if open := openListeners(t, ports...); len(open) > 0 {
		t.Errorf("Karpenter's ports %v listen beyond loopback in the root namespace: %v", ports, open)
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", k.proc.PID()))
	if err != nil || theirs == self {
		t.Errorf("karpenter (pid %d) is in network namespace %q, the root one is %q (%v)", k.proc.PID(), theirs, self, err)
	}
	nsPath := filepath.Join(c.Dir, "karpenter-netns", "net")
	if !mounted(t, nsPath) {
		t.Errorf("no namespace mount at %s while Karpenter runs", nsPath)
	}
	// Both servers answer through the relays: they run, only elsewhere.
	for _, u := range []string{fmt.Sprintf("http://127.0.0.1:%d/metrics", k.metricsPort), fmt.Sprintf("http://127.0.0.1:%d/healthz", k.healthPort)} {
		if err := httpCheck(nil, u)(context.Background()); err != nil {
			t.Errorf("through the relay: %v", err)
		}
	}

	if err := c.StopKarpenter(context.Background()); err != nil {
		t.Fatalf("StopKarpenter: %v", err)
	}
	if mounted(t, nsPath) {
		t.Errorf("namespace still mounted at %s after StopKarpenter", nsPath)
	}
	if _, err := os.Stat(filepath.Dir(nsPath)); !os.IsNotExist(err) {
		t.Errorf("%s left after StopKarpenter (stat: %v)", filepath.Dir(nsPath), err)
	}
	for _, p := range ports {
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second); err == nil {
			conn.Close()
			t.Errorf("127.0.0.1:%d still accepts after StopKarpenter", p)
		}
	}
	client := http.Client{Timeout: time.Second}
	if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", k.healthPort)); err == nil {
		resp.Body.Close()
		t.Errorf("Karpenter's health port still answers after StopKarpenter")
	}
}

func mounted(t *testing.T, path string) bool {
	t.Helper()
	ms, err := MountsUnder(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms) > 0
}

// openListeners lists the root namespace's TCP listeners on ports at an address other than
// loopback, read from /proc/net/tcp and tcp6 (this test's threads are in the root namespace).
func openListeners(t *testing.T, ports ...int) []string {
	t.Helper()
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		ls, err := tcpListeners(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if want[l.Port] && !l.IP.IsLoopback() {
				out = append(out, fmt.Sprintf("%s (%s)", net.JoinHostPort(l.IP.String(), strconv.Itoa(l.Port)), f))
			}
		}
	}
	return out
}

// tcpListeners parses the LISTEN rows of a /proc/net/tcp{,6} table: local_address is the
// address in hex, as the kernel's 32-bit words in host (little-endian) order, then the port.
func tcpListeners(path string) ([]net.TCPAddr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []net.TCPAddr
	s := bufio.NewScanner(f)
	s.Scan() // header
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 4 || fs[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		addr, port, ok := strings.Cut(fs[1], ":")
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(addr)
		if err != nil || len(raw)%4 != 0 {
			return nil, fmt.Errorf("%s: bad address %q", path, fs[1])
		}
		for i := 0; i < len(raw); i += 4 {
			raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: bad port %q", path, fs[1])
		}
		out = append(out, net.TCPAddr{IP: net.IP(raw), Port: int(p)})
	}
	return out, s.Err()
}
