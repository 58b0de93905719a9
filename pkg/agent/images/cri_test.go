package images

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func img(id string, size uint64, tags, digests []string) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, RepoTags: tags, RepoDigests: digests}
}

func ids(imgs []*runtimeapi.Image) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, i.Id)
	}
	sort.Strings(out)
	return out
}

func TestCRIListerProtocols(t *testing.T) {
	three := []*runtimeapi.Image{
		img("sha256:a", 10, []string{"nginx:1.16"}, nil),
		img("sha256:b", 20, []string{"busybox"}, nil),
		img("sha256:c", 30, nil, nil),
	}
	cases := []struct {
		name                  string
		streaming             bool
		wantStream, wantUnary int32 // calls after two listings
	}{
		// why: a runtime with StreamImages must be read through it (no 16 MiB message ceiling).
		{name: "runtime streams", streaming: true, wantStream: 2, wantUnary: 0},
		// why: containerd 1.6 answers Unimplemented; the first listing falls back and the
		// second goes straight to ListImages.
		{name: "runtime without streaming", streaming: false, wantStream: 1, wantUnary: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &fakeImageService{streaming: tc.streaming}
			svc.set(three...)
			rt := startFakeRuntime(t, svc)
			l := NewCRILister(rt.socket, 5*time.Second)
			defer l.Close(context.Background())
			for i := 0; i < 2; i++ {
				got, err := l.List(context.Background())
				if err != nil {
					t.Fatalf("listing %d: %v", i, err)
				}
				if g := ids(got); len(g) != 3 || g[0] != "sha256:a" || g[2] != "sha256:c" {
					t.Fatalf("listing %d: ids %v, want a, b, c", i, g)
				}
			}
			if s, u := svc.streamCalls.Load(), svc.listCalls.Load(); s != tc.wantStream || u != tc.wantUnary {
				t.Errorf("StreamImages calls %d, ListImages calls %d; want %d, %d", s, u, tc.wantStream, tc.wantUnary)
			}
		})
	}
}

func TestCRIListerFailures(t *testing.T) {
	cases := []struct {
		name       string
		setup      func(t *testing.T) string // returns the endpoint
		wantReason string
	}{
		{name: "no socket at the path", wantReason: ReasonSocketMissing, setup: func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "absent.sock")
		}},
		{name: "a regular file at the path", wantReason: ReasonNotCRI, setup: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "file.sock")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		// why: a socket file left behind by a dead runtime: connect is refused.
		{name: "socket nobody listens on", wantReason: ReasonRuntimeUnreachable, setup: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "dead.sock")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return p
		}},
		// why: a hung runtime (accepts, never answers) must cost one timeout, not block the agent.
		{name: "runtime that accepts and never answers", wantReason: ReasonRuntimeUnreachable, setup: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "hung.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			var conns []net.Conn
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns = append(conns, c)
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				<-done
				for _, c := range conns {
					c.Close()
				}
			})
			return p
		}},
		{name: "gRPC server that is not a CRI runtime", wantReason: ReasonNotCRI, setup: func(t *testing.T) string {
			return startFakeRuntime(t, &fakeImageService{notCRI: true}).socket
		}},
		// why: the wrong socket (here an HTTP-ish server that never speaks HTTP/2).
		{name: "server speaking another protocol", wantReason: ReasonNotCRI, setup: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "http.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					// Answer the client's preface as an HTTP/1.1 server would, then wait for
					// the client to give up (closing first would race its preface write).
					go func() {
						defer c.Close()
						buf := make([]byte, 64)
						if _, err := c.Read(buf); err != nil {
							return
						}
						_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
						_, _ = io.Copy(io.Discard, c)
					}()
				}
			}()
			return p
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := NewCRILister(tc.setup(t), time.Second)
			defer l.Close(context.Background())
			_, err := l.List(context.Background())
			if err == nil {
				t.Fatal("listing succeeded")
			}
			t.Logf("%v", err)
			if r := ReasonOf(err); r != tc.wantReason {
				t.Fatalf("reason %q (%v), want %q", r, err, tc.wantReason)
			}
		})
	}
}

// A runtime that goes away and comes back on the same path is listed again without restarting
// the agent.
func TestCRIListerRuntimeRestart(t *testing.T) {
	svc := &fakeImageService{}
	svc.set(img("sha256:a", 1, []string{"nginx"}, nil))
	rt := startFakeRuntime(t, svc)
	l := NewCRILister(rt.socket, 2*time.Second)
	defer l.Close(context.Background())
	ctx := context.Background()
	if _, err := l.List(ctx); err != nil {
		t.Fatal(err)
	}
	rt.stop()
	if _, err := l.List(ctx); ReasonOf(err) != ReasonSocketMissing {
		t.Fatalf("after the runtime stopped: %v, want %s", err, ReasonSocketMissing)
	}
	svc.set(img("sha256:a", 1, []string{"nginx"}, nil), img("sha256:b", 2, []string{"redis"}, nil))
	rt.start()
	got, err := l.List(ctx)
	if err != nil {
		t.Fatalf("after the runtime restarted: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("after restart: %d images, want 2", len(got))
	}
}
