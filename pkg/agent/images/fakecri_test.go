package images

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeImageService is a CRI v1 ImageService on a unix socket in a test's temporary directory:
// the agent's real gRPC client (k8s.io/cri-client) talks to it exactly as to containerd.
type fakeImageService struct {
	runtimeapi.UnimplementedImageServiceServer
	// streaming: implement StreamImages (else it answers Unimplemented, as containerd 1.6 does).
	streaming bool
	// notCRI: answer ImageFsInfo with Unimplemented, like a gRPC server that is not a runtime.
	notCRI bool

	mu     sync.Mutex
	images []*runtimeapi.Image

	listCalls, streamCalls atomic.Int32
}

func (f *fakeImageService) set(imgs ...*runtimeapi.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = imgs
}

func (f *fakeImageService) snapshot() []*runtimeapi.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.Image(nil), f.images...)
}

func (f *fakeImageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.notCRI {
		return nil, status.Error(codes.Unimplemented, "unknown service runtime.v1.ImageService")
	}
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *fakeImageService) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.listCalls.Add(1)
	return &runtimeapi.ListImagesResponse{Images: f.snapshot()}, nil
}

func (f *fakeImageService) StreamImages(_ *runtimeapi.StreamImagesRequest, s grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	f.streamCalls.Add(1)
	if !f.streaming {
		return status.Error(codes.Unimplemented, "method StreamImages not implemented")
	}
	imgs := f.snapshot()
	// why: two messages, so the client must gather the whole stream, not the first chunk.
	half := len(imgs) / 2
	for _, chunk := range [][]*runtimeapi.Image{imgs[:half], imgs[half:]} {
		if len(chunk) == 0 {
			continue
		}
		if err := s.Send(&runtimeapi.StreamImagesResponse{Images: chunk}); err != nil {
			return err
		}
	}
	return nil
}

// fakeRuntime serves a fakeImageService on a socket; stop/start simulate a runtime restart on
// the same path.
type fakeRuntime struct {
	t      *testing.T
	socket string
	svc    *fakeImageService
	srv    *grpc.Server
	done   chan struct{}
}

func startFakeRuntime(t *testing.T, svc *fakeImageService) *fakeRuntime {
	t.Helper()
	r := &fakeRuntime{t: t, socket: filepath.Join(t.TempDir(), "cri.sock"), svc: svc}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *fakeRuntime) start() {
	r.t.Helper()
	ln, err := net.Listen("unix", r.socket)
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(r.srv, r.svc)
	r.done = make(chan struct{})
	go func() { defer close(r.done); _ = r.srv.Serve(ln) }()
}

// stop stops serving; Go's unix listener removes the socket file on close.
func (r *fakeRuntime) stop() {
	if r.srv == nil {
		return
	}
	r.srv.Stop()
	<-r.done
	r.srv = nil
}
