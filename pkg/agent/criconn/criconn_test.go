package criconn

import (
	"context"
	"errors"
	"testing"
)

type fakeSvc struct{ closed int }

func (f *fakeSvc) Close(context.Context) error { f.closed++; return nil }

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"/run/containerd/containerd.sock":        "unix:///run/containerd/containerd.sock",
		"unix:///run/containerd/containerd.sock": "unix:///run/containerd/containerd.sock",
		"tcp://127.0.0.1:1234":                   "tcp://127.0.0.1:1234",
	} {
		if got := Endpoint(in); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConnDialsOnceAndAgainAfterReset(t *testing.T) {
	ctx := context.Background()
	var dials []*fakeSvc
	fail := errors.New("socket gone")
	failNext := true
	c := New(func(context.Context) (*fakeSvc, error) {
		if failNext {
			failNext = false
			return nil, fail
		}
		s := &fakeSvc{}
		dials = append(dials, s)
		return s, nil
	})
	// A failed dial is returned and not kept: the next Get dials again.
	if _, err := c.Get(ctx); !errors.Is(err, fail) {
		t.Fatalf("first Get: %v, want %v", err, fail)
	}
	a, err := c.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Get(ctx); b != a || len(dials) != 1 {
		t.Fatalf("second Get dialled again (%d dials)", len(dials))
	}
	c.Reset(ctx)
	c.Reset(ctx) // nothing open: no second Close
	if a.closed != 1 {
		t.Fatalf("Reset closed the service %d times, want 1", a.closed)
	}
	if b, _ := c.Get(ctx); b == a || len(dials) != 2 {
		t.Fatalf("Get after Reset reused the closed service (%d dials)", len(dials))
	}
}
