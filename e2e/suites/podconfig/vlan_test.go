package podconfig

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
	"github.com/berth-sched/berth/pkg/agent/podnet"
)

// vlanParent is the host interface the suite allow-lists for VLANs, on the operator and on the
// agent alike (the chart passes podConfig.allowedParents to both). testVLAN creates it in the
// node's namespace: one end of a veth pair (a dummy link would do, but this kernel may lack
// the dummy driver).
const vlanParent = "e2evl0"

func (e *env) startOperator(name string) (*cluster.Process, error) {
	return framework.StartPodConfigOperator(e.ctx, e.c, name, "--podconfig-allowed-parents="+vlanParent)
}

func (e *env) startAgent(name string) (*cluster.Process, error) {
	return framework.StartPodConfigAgent(e.ctx, e.c, name, "--podconfig-allowed-parents="+vlanParent)
}

// testVLAN: a PodNetwork whose spec.vlan is VLAN 10 of the allow-listed parent (accepted by
// the operator, checked again by the agent), and a PodConfig attaching pods a and b to it.
// Where the node's kernel has 802.1Q, the agent puts VLAN 10 of the parent on the network's
// bridge and the pods talk over it; where it has not (CONFIG_VLAN_8021Q unset), every entry is
// Failed saying so and nothing reaches the pods. Either way, deleting the PodConfig leaves the
// node's `ip -d link` and `ip addr` exactly as they were, parent included.
func (e *env) testVLAN(t *testing.T) {
	if out, err := e.rn.InNetNS(e.ctx, "ip", "link", "add", vlanParent, "type", "veth", "peer", "name", vlanParent+"p"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer func() { _, _ = e.rn.InNetNS(context.Background(), "ip", "link", "del", vlanParent) }()
	for _, l := range []string{vlanParent, vlanParent + "p"} {
		if out, err := e.rn.InNetNS(e.ctx, "ip", "link", "set", l, "up"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	// why: "before" must not catch the pair while its carrier is still coming up (the flags
	// NO-CARRIER then LOWER_UP would differ from "after" for a reason that is not Berth's).
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err := e.rn.InNetNS(ctx, "ip", "-o", "link", "show", "dev", vlanParent)
		out2, err2 := e.rn.InNetNS(ctx, "ip", "-o", "link", "show", "dev", vlanParent+"p")
		return err == nil && err2 == nil && !strings.Contains(out+out2, "NO-CARRIER") && strings.Contains(out+out2, "LOWER_UP"), nil
	})
	if err != nil {
		t.Fatalf("parent pair %s has no carrier: %v", vlanParent, err)
	}
	// The kernel decides which outcome is right: probe it with a VLAN the test makes itself.
	_, probeErr := e.rn.InNetNS(e.ctx, "ip", "link", "add", "link", vlanParent, "name", "e2evlprobe", "type", "vlan", "id", "4094")
	supported := probeErr == nil
	if supported {
		if out, err := e.rn.InNetNS(e.ctx, "ip", "link", "del", "e2evlprobe"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	t.Logf("the node's kernel supports 802.1Q VLANs: %v", supported)
	before, err := framework.NodeNetState(e.ctx, e.rn)
	if err != nil {
		t.Fatal(err)
	}
	const name, att, network, bridge = "vlan", "vlan10", "e2e-vlan", "berth-e2ev"
	pn := framework.NewPodNetwork(network, bridge, "192.168.160.0/24", "", grant())
	pn.Spec.VLAN = &berthv1alpha1.PodNetworkVLAN{ID: 10, Parent: vlanParent}
	e.createNetwork(t, pn)
	pc := onePodConfig(name, att, network)
	if err := e.cl.Create(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	wantState, wantErr := berthv1alpha1.AttachmentConfigured, ""
	if !supported {
		wantState, wantErr = berthv1alpha1.AttachmentFailed, "the node's kernel has no 802.1Q VLAN support"
	}
	var last string
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(pc), pc); err != nil {
			return false, nil
		}
		var states []string
		ok := len(pc.Status.Pods) == 2
		for _, en := range pc.Status.Pods {
			states = append(states, fmt.Sprintf("%s/%s=%s %s", en.Pod, en.Attachment, en.State, en.LastError))
			ok = ok && en.State == wantState && strings.Contains(en.LastError, wantErr)
		}
		last = strings.Join(states, "; ")
		return ok, nil
	})
	if err != nil {
		t.Fatalf("entries not %s %q: %s", wantState, wantErr, last)
	}
	vlink := podnet.VLANLinkName(vlanParent, 10)
	if supported {
		out, err := e.rn.InNetNS(e.ctx, "ip", "-d", "link", "show", vlink)
		if err != nil || !strings.Contains(out, "@"+vlanParent) || !strings.Contains(out, "vlan protocol 802.1Q id 10") || !strings.Contains(out, "master "+bridge) ||
			!strings.Contains(out, "group "+strconv.Itoa(podnet.LinkGroup)) {
			t.Errorf("ip -d link show %s: %v\n%s\nwant VLAN 10 of %s, port of %s, marked group %d", vlink, err, out, vlanParent, bridge, podnet.LinkGroup)
		}
		t.Logf("ip -d link show %s:\n%s", vlink, out)
		e.exchange(t, pc, "a", "b", att, "udp")
		e.exchange(t, pc, "b", "a", att, "tcp")
	} else {
		for _, p := range []string{"a", "b"} {
			ifs, err := framework.NetechoInterfaces(e.ctx, e.rn, e.pod(t, p).Status.PodIP)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := ifs[att]; ok {
				t.Errorf("pod %s has %s although its VLAN could not be made", p, att)
			}
		}
		t.Logf("entries: %s", last)
	}
	if err := e.cl.Delete(e.ctx, pc); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, client.ObjectKeyFromObject(pc), pc)), nil
	})
	if err != nil {
		t.Fatalf("PodConfig not gone: finalizers %v, status %+v; agent log:\n%s", pc.Finalizers, pc.Status, e.agent.Tail(40))
	}
	var after []string
	var stateErr error
	err = wait.PollUntilContextTimeout(e.ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		a, err := framework.NodeNetState(ctx, e.rn)
		if err != nil {
			stateErr = err
			return false, nil
		}
		after = a
		return slices.Equal(after, before), nil
	})
	if err != nil {
		t.Fatalf("after deleting the PodConfig the node differs from before (%v):\nbefore:\n%s\nafter:\n%s",
			stateErr, strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	t.Logf("ip -d link and ip addr of the node identical before and after (%d lines), parent %s included", len(after), vlanParent)
}

// testReadyNeedsRuntime: the real agent with --podconfig is not ready while its CRI socket is
// missing (its /readyz names the executor and the socket), and becomes ready once the socket
// is there, without a restart. Run while no PodConfig exists: the second agent has nothing
// to act on beside the suite's own.
func (e *env) testReadyNeedsRuntime(t *testing.T) {
	// why: a unix socket path must stay within 108 bytes; t.TempDir's is too long.
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	link := filepath.Join(dir, "cri.sock")
	kc, err := e.c.WriteKubeconfig("berth-agent-ready", cluster.Identity{User: framework.PodConfigAgentUser})
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("unused"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := e.c.StartComponent(e.ctx, cluster.ProcessSpec{Name: "berth-agent-ready", Binary: filepath.Join(e.c.BinDir, "berth-agent"),
		Args: []string{"--node-name=" + realNode, "--kubeconfig=" + kc, "--watch-pods=false", "--watcher-url=http://[::1]:9",
			"--token-file=" + tok, "--listen=" + addr, "--sample-interval=200ms", "--report-interval=1h", "--cri-socket=" + link,
			"--image-interval=1h", "--podconfig", "-v=2"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.c.StopComponent(p)
	readyz := func(want int, body string) {
		t.Helper()
		var code int
		var got string
		err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			code, got = resp.StatusCode, string(b)
			return code == want && strings.Contains(got, body), nil
		})
		if err != nil {
			t.Fatalf("/readyz %d %q, want %d %q; agent log:\n%s", code, got, want, body, p.Tail(20))
		}
	}
	readyz(http.StatusServiceUnavailable, "podconfig: PodConfig executor: container runtime not reached yet: container runtime unreachable: CRI socket "+link)
	if err := os.Symlink(e.rn.ContainerdSocket, link); err != nil {
		t.Fatal(err)
	}
	readyz(http.StatusOK, "ok")
}
