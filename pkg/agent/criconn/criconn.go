// Package criconn keeps one lazily dialled connection to the container runtime's CRI socket.
// The agent's image lister and its pod-sandbox resolver each hold one.
package criconn

import (
	"context"
	"strings"
	"sync"
)

// Endpoint turns a bare socket path into the unix:// URL cri-client dials; URLs pass as given.
func Endpoint(s string) string {
	if !strings.Contains(s, "://") {
		return "unix://" + s
	}
	return s
}

// Service is what cri-client's image and runtime services have in common here.
type Service interface {
	Close(ctx context.Context) error
}

// Conn dials on first use and keeps the service until Reset. Callers Reset after a failed call:
// a restarted runtime is a new server behind the same path, so they start over with a fresh
// connection rather than trusting gRPC's reconnect to the old one.
type Conn[S Service] struct {
	dial func(context.Context) (S, error)

	mu  sync.Mutex
	svc S
	ok  bool
}

// New returns a connection that dial opens when first needed.
func New[S Service](dial func(context.Context) (S, error)) *Conn[S] {
	return &Conn[S]{dial: dial}
}

// Get returns the open service, dialling it if there is none.
func (c *Conn[S]) Get(ctx context.Context) (S, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		return c.svc, nil
	}
	svc, err := c.dial(ctx)
	if err != nil {
		var zero S
		return zero, err
	}
	c.svc, c.ok = svc, true
	return svc, nil
}

// Reset closes the service, if open; the next Get dials again.
func (c *Conn[S]) Reset(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		_ = c.svc.Close(ctx)
		var zero S
		c.svc, c.ok = zero, false
	}
}
