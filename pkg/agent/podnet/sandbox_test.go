package podnet

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is a CRI v1 RuntimeService on a unix socket in the test's directory: the real
// cri-client talks to it as to containerd or CRI-O.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu        sync.Mutex
	sandboxes []*runtimeapi.PodSandbox
	info      map[string]map[string]string // by sandbox id
	hostNet   map[string]bool
	filters   []*runtimeapi.PodSandboxFilter
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, r *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, r.Filter)
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		// why: a real runtime filters by label and state; the resolver must not depend on it
		// doing so, but it must send the filter (checked below).
		if uid := r.GetFilter().GetLabelSelector()[podUIDLabel]; uid != "" && s.Labels[podUIDLabel] != uid {
			continue
		}
		out = append(out, s)
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (f *fakeRuntime) PodSandboxStatus(_ context.Context, r *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mode := runtimeapi.NamespaceMode_POD
	if f.hostNet[r.PodSandboxId] {
		mode = runtimeapi.NamespaceMode_NODE
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: r.PodSandboxId,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: r.PodSandboxId, Namespace: "ns", Uid: r.PodSandboxId}, CreatedAt: 1,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}}}}
	if r.Verbose {
		resp.Info = f.info[r.PodSandboxId]
	}
	return resp, nil
}

func serveFake(t *testing.T, f *fakeRuntime) (socket string, stop func()) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "cri.sock")
	s := serveOn(t, socket, f)
	var once sync.Once
	stop = func() { once.Do(s.Stop) }
	t.Cleanup(stop)
	return socket, stop
}

// serveOn serves f as a CRI runtime on the unix socket; the caller stops the server.
func serveOn(t *testing.T, socket string, f *fakeRuntime) *grpc.Server {
	t.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	return s
}

// Shapes of PodSandboxStatus' verbose "info" as the two runtimes write them (fields trimmed).
const (
	containerdInfo = `{"pid":4242,"processStatus":"running","netNamespaceClosed":false,"image":"registry.k8s.io/pause:3.10.1",
"runtimeSpec":{"ociVersion":"1.0.2","linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/run/containerd/netns/cni-1234"}]}}}`
	crioInfo = `{"image":"registry.k8s.io/pause:3.10.1","runtimeSpec":{"ociVersion":"1.0.2","linux":{"namespaces":[{"type":"network","path":"/var/run/netns/7c2f5c7e"},{"type":"ipc","path":"/var/run/ipcns/7c2f5c7e"}]}}}`
)

func TestParseSandboxInfo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		info     map[string]string
		wantPath string
		wantErr  string
	}{
		{name: "containerd: the pid wins (works from another mount namespace)", info: map[string]string{"info": containerdInfo}, wantPath: "/host/proc/4242/ns/net"},
		{name: "CRI-O: no pid, the runtime spec's path", info: map[string]string{"info": crioInfo}, wantPath: "/var/run/netns/7c2f5c7e"},
		{name: "closed namespace", info: map[string]string{"info": `{"pid":1,"netNamespaceClosed":true}`}, wantErr: "closed"},
		{name: "not verbose", info: map[string]string{}, wantErr: `no "info"`},
		{name: "garbage", info: map[string]string{"info": "{"}, wantErr: "verbose status info"},
		{name: "neither pid nor path", info: map[string]string{"info": `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`}, wantPath: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si, err := ParseSandboxInfo(tc.info)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := si.netNSPath("/host/proc"); got != tc.wantPath {
				t.Errorf("path %q, want %q", got, tc.wantPath)
			}
		})
	}
}

func TestCRIResolver(t *testing.T) {
	f := &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			{Id: "old-ready", CreatedAt: 1, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{podUIDLabel: "uid-a"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-a"}},
			{Id: "new-ready", CreatedAt: 2, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{podUIDLabel: "uid-a"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-a"}},
			{Id: "newest-notready", CreatedAt: 3, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, Labels: map[string]string{podUIDLabel: "uid-a"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-a"}},
			{Id: "crio", CreatedAt: 1, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{podUIDLabel: "uid-b"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-b"}},
			{Id: "hostnet", CreatedAt: 1, State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{podUIDLabel: "uid-h"}, Metadata: &runtimeapi.PodSandboxMetadata{Uid: "uid-h"}},
		},
		info: map[string]map[string]string{
			"old-ready": {"info": `{"pid":1}`},
			"new-ready": {"info": containerdInfo},
			"crio":      {"info": crioInfo},
		},
		hostNet: map[string]bool{"hostnet": true},
	}
	socket, stop := serveFake(t, f)
	r := NewCRIResolver(socket, "/hostproc", 2*time.Second)
	defer r.Close(context.Background())
	ctx := context.Background()

	for _, tc := range []struct {
		name, uid string
		want      Sandbox
		wantErr   error
	}{
		{name: "newest ready sandbox, containerd shape", uid: "uid-a", want: Sandbox{ID: "new-ready", NetNS: "/hostproc/4242/ns/net"}},
		{name: "CRI-O shape", uid: "uid-b", want: Sandbox{ID: "crio", NetNS: "/var/run/netns/7c2f5c7e"}},
		{name: "host network", uid: "uid-h", want: Sandbox{ID: "hostnet", HostNetwork: true}},
		{name: "no sandbox", uid: "uid-none", wantErr: ErrNoSandbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Sandbox(ctx, tc.uid)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	f.mu.Lock()
	last := f.filters[len(f.filters)-1]
	f.mu.Unlock()
	if last.GetState().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || last.GetLabelSelector()[podUIDLabel] != "uid-none" {
		t.Errorf("filter sent %+v, want READY and the pod UID label", last)
	}

	t.Run("socket gone: a RuntimeError naming the socket", func(t *testing.T) {
		stop()
		if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		_, err := r.Sandbox(ctx, "uid-a")
		var re *RuntimeError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), socket) {
			t.Fatalf("err %v, want a RuntimeError naming %s", err, socket)
		}
	})
	t.Run("socket back: the resolver reconnects", func(t *testing.T) {
		defer serveOn(t, socket, f).Stop()
		got, err := r.Sandbox(ctx, "uid-b")
		if err != nil || got.ID != "crio" {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
}
