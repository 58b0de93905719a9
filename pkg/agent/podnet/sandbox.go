package podnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/berth-sched/berth/pkg/agent/criconn"
)

// Sandbox is a pod's running sandbox as the runtime reports it.
type Sandbox struct {
	ID string
	// NetNS is the path of the sandbox's network namespace, openable by the agent:
	// <procRoot>/<pid>/ns/net when the runtime reports the sandbox's pid (works across mount
	// namespaces with a host /proc mount or hostPID), else the runtime spec's path.
	NetNS string
	// HostNetwork: the sandbox uses the node's namespace (never touched).
	HostNetwork bool
}

// Resolver finds a pod's ready sandbox.
type Resolver interface {
	Sandbox(ctx context.Context, podUID string) (Sandbox, error)
}

// ErrNoSandbox: the runtime has no ready sandbox for the pod (not created yet, or stopped).
var ErrNoSandbox = errors.New("no ready sandbox")

// RuntimeError is a runtime that cannot be asked (socket gone, not answering, not a CRI).
type RuntimeError struct{ Err error }

func (e *RuntimeError) Error() string { return "container runtime unreachable: " + e.Err.Error() }
func (e *RuntimeError) Unwrap() error { return e.Err }

// CRIResolver asks a CRI v1 RuntimeService (containerd, CRI-O, any conforming runtime) through
// k8s.io/cri-client: ListPodSandbox filtered by the kubelet's pod-UID label and state READY,
// then PodSandboxStatus with verbose info for the pid and the network namespace path. The
// connection is built lazily and rebuilt after a failure (a restarted runtime is a new server).
type CRIResolver struct {
	Endpoint string
	Timeout  time.Duration
	// ProcRoot is the host's /proc as the agent sees it ("/proc" with hostPID).
	ProcRoot string

	conn *criconn.Conn[internalapi.RuntimeService]
}

// NewCRIResolver returns a resolver for endpoint (a socket path or unix:// URL).
func NewCRIResolver(endpoint, procRoot string, timeout time.Duration) *CRIResolver {
	if procRoot == "" {
		procRoot = "/proc"
	}
	r := &CRIResolver{Endpoint: criconn.Endpoint(endpoint), Timeout: timeout, ProcRoot: procRoot}
	r.conn = criconn.New(func(ctx context.Context) (internalapi.RuntimeService, error) {
		return criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint(r.Endpoint).
			WithConnectionTimeout(r.Timeout).WithTracerProvider(nil).Build(ctx)
	})
	return r
}

// podUIDLabel is the label the kubelet puts on every sandbox it creates.
const podUIDLabel = "io.kubernetes.pod.uid"

// Sandbox implements Resolver.
func (r *CRIResolver) Sandbox(ctx context.Context, podUID string) (Sandbox, error) {
	if p, ok := strings.CutPrefix(r.Endpoint, "unix://"); ok {
		if _, err := os.Stat(p); err != nil {
			r.conn.Reset(ctx)
			return Sandbox{}, &RuntimeError{Err: fmt.Errorf("CRI socket %s: %w", p, err)}
		}
	}
	svc, err := r.conn.Get(ctx)
	if err != nil {
		return Sandbox{}, &RuntimeError{Err: err}
	}
	cctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	list, err := svc.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{podUIDLabel: podUID},
	})
	if err != nil {
		r.conn.Reset(ctx)
		return Sandbox{}, classify(err)
	}
	// The newest ready sandbox: the kubelet recreates sandboxes, and an old one may linger
	// READY for a moment while the new one starts.
	var best *runtimeapi.PodSandbox
	for _, s := range list {
		if s.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || s.GetMetadata().GetUid() != "" && s.GetMetadata().GetUid() != podUID {
			continue
		}
		if best == nil || s.GetCreatedAt() > best.GetCreatedAt() {
			best = s
		}
	}
	if best == nil {
		return Sandbox{}, ErrNoSandbox
	}
	st, err := svc.PodSandboxStatus(cctx, best.Id, true)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return Sandbox{}, ErrNoSandbox
		}
		r.conn.Reset(ctx)
		return Sandbox{}, classify(err)
	}
	sb := Sandbox{ID: best.Id}
	if st.GetStatus().GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
		sb.HostNetwork = true
		return sb, nil
	}
	info, err := ParseSandboxInfo(st.GetInfo())
	if err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", short(best.Id), err)
	}
	sb.NetNS = info.netNSPath(r.ProcRoot)
	if sb.NetNS == "" {
		return Sandbox{}, fmt.Errorf("sandbox %s: the runtime's verbose status names neither a pid nor a network namespace path", short(best.Id))
	}
	return sb, nil
}

// Ping implements Pinger: the runtime's Version call over the socket.
func (r *CRIResolver) Ping(ctx context.Context) error {
	if p, ok := strings.CutPrefix(r.Endpoint, "unix://"); ok {
		if _, err := os.Stat(p); err != nil {
			r.conn.Reset(ctx)
			return &RuntimeError{Err: fmt.Errorf("CRI socket %s: %w", p, err)}
		}
	}
	svc, err := r.conn.Get(ctx)
	if err != nil {
		return &RuntimeError{Err: err}
	}
	cctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	if _, err := svc.Version(cctx, ""); err != nil {
		r.conn.Reset(ctx)
		return &RuntimeError{Err: err}
	}
	return nil
}

// Close releases the connection.
func (r *CRIResolver) Close(ctx context.Context) { r.conn.Reset(ctx) }

func classify(err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unimplemented, codes.Canceled:
		return &RuntimeError{Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &RuntimeError{Err: err}
	}
	return err
}

// SandboxInfo is what the agent reads from PodSandboxStatus' verbose info: both containerd
// (1.x and 2.x) and CRI-O put a JSON document under the key "info" carrying the sandbox's pid
// and its OCI runtime spec, whose linux.namespaces names the network namespace's path.
type SandboxInfo struct {
	Pid         int  `json:"pid"`
	NetNSClosed bool `json:"netNamespaceClosed"`
	RuntimeSpec *struct {
		Linux *struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

// ParseSandboxInfo reads the verbose info map of PodSandboxStatus.
func ParseSandboxInfo(info map[string]string) (SandboxInfo, error) {
	raw, ok := info["info"]
	if !ok {
		return SandboxInfo{}, errors.New(`the runtime's verbose status has no "info" (is verbose status supported?)`)
	}
	var si SandboxInfo
	if err := json.Unmarshal([]byte(raw), &si); err != nil {
		return SandboxInfo{}, fmt.Errorf("verbose status info: %w", err)
	}
	if si.NetNSClosed {
		return SandboxInfo{}, errors.New("the sandbox's network namespace is closed")
	}
	return si, nil
}

// NetNSSpecPath is the network namespace path in the runtime spec ("" when there is none).
func (si SandboxInfo) NetNSSpecPath() string {
	if si.RuntimeSpec == nil || si.RuntimeSpec.Linux == nil {
		return ""
	}
	for _, ns := range si.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

func (si SandboxInfo) netNSPath(procRoot string) string {
	if si.Pid > 0 {
		return filepath.Join(procRoot, strconv.Itoa(si.Pid), "ns", "net")
	}
	return si.NetNSSpecPath()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
