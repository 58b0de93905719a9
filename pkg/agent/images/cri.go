package images

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/berth-sched/berth/pkg/agent/criconn"
)

// Reasons a listing failed (the Stale condition's reason, the error counter's label).
const (
	// ReasonSocketMissing: no socket at the configured path (runtime stopped, wrong path, or
	// the hostPath mount went stale when the runtime re-created it).
	ReasonSocketMissing = "SocketMissing"
	// ReasonRuntimeUnreachable: the socket exists but nothing answers gRPC on it in time.
	ReasonRuntimeUnreachable = "RuntimeUnreachable"
	// ReasonNotCRI: something answers but not the CRI v1 ImageService (wrong socket, or a
	// runtime with its CRI plugin disabled).
	ReasonNotCRI = "NotCRIv1"
	// ReasonRuntimeError: the runtime answered with another error.
	ReasonRuntimeError = "RuntimeError"
	// ReasonTooManyImages: the runtime listed more images than --max-images.
	ReasonTooManyImages = "TooManyImages"
	// ReasonTooLarge: the inventory would exceed the object size limit.
	ReasonTooLarge = "TooLarge"
)

// Lister lists the node's images.
type Lister interface {
	List(ctx context.Context) ([]*runtimeapi.Image, error)
}

// ListError is a failed listing with the reason it is reported under.
type ListError struct {
	Reason string
	Err    error
}

func (e *ListError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *ListError) Unwrap() error { return e.Err }

// CRILister lists images through a CRI v1 ImageService with k8s.io/cri-client: StreamImages
// first (no gRPC message-size ceiling on nodes with many images), ListImages once the runtime
// answers StreamImages with Unimplemented (cri-client remembers the fallback). The connection
// is built lazily and rebuilt after a failure, so a runtime that starts after the agent, or
// restarts, is picked up on the next listing.
type CRILister struct {
	// Endpoint is unix:///path or a bare socket path.
	Endpoint string
	// Timeout bounds connecting and each listing.
	Timeout time.Duration

	conn *criconn.Conn[internalapi.ImageManagerService]
}

// NewCRILister returns a lister for endpoint (a socket path or unix:// URL).
func NewCRILister(endpoint string, timeout time.Duration) *CRILister {
	l := &CRILister{Endpoint: criconn.Endpoint(endpoint), Timeout: timeout}
	l.conn = criconn.New(func(ctx context.Context) (internalapi.ImageManagerService, error) {
		return criclient.NewRemoteImageServiceBuilder().WithEndpoint(l.Endpoint).
			WithConnectionTimeout(l.Timeout).WithUseStreaming(true).Build(ctx)
	})
	return l
}

// SocketPath is the filesystem path of a unix endpoint, "" for other schemes.
func (l *CRILister) SocketPath() string {
	if p, ok := strings.CutPrefix(l.Endpoint, "unix://"); ok {
		return p
	}
	return ""
}

// List implements Lister.
func (l *CRILister) List(ctx context.Context) ([]*runtimeapi.Image, error) {
	if p := l.SocketPath(); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			l.conn.Reset(ctx)
			return nil, &ListError{Reason: ReasonSocketMissing, Err: fmt.Errorf("CRI socket %s: %w", p, err)}
		}
		if st.Mode()&os.ModeSocket == 0 {
			l.conn.Reset(ctx)
			return nil, &ListError{Reason: ReasonNotCRI, Err: fmt.Errorf("%s is not a socket (%s)", p, st.Mode().Type())}
		}
	}
	svc, err := l.conn.Get(ctx)
	if err != nil {
		return nil, classify(err)
	}
	imgs, err := svc.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		// A restarted runtime is a new server behind the same path: start over with a fresh
		// connection rather than trusting gRPC's reconnect to the old one.
		l.conn.Reset(ctx)
		return nil, classify(err)
	}
	return imgs, nil
}

// Close releases the connection.
func (l *CRILister) Close(ctx context.Context) { l.conn.Reset(ctx) }

// classify maps a cri-client error to a reason. cri-client wraps gRPC statuses with %w, so
// status.FromError finds them through the chain.
func classify(err error) error {
	var le *ListError
	if errors.As(err, &le) {
		return err
	}
	reason := ReasonRuntimeError
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unimplemented:
			reason = ReasonNotCRI
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			reason = ReasonRuntimeUnreachable
			// A non-gRPC server on the socket fails the HTTP/2 handshake: gRPC reports it as
			// Unavailable, but it is the wrong protocol, not a runtime that is down.
			if m := st.Message(); strings.Contains(m, "http2") || strings.Contains(m, "frame") || strings.Contains(m, "handshake") {
				reason = ReasonNotCRI
			}
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		reason = ReasonRuntimeUnreachable
	}
	return &ListError{Reason: reason, Err: err}
}

// ReasonOf is the reason of a List error.
func ReasonOf(err error) string {
	var le *ListError
	if errors.As(err, &le) {
		return le.Reason
	}
	return ReasonRuntimeError
}
