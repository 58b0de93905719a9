package loadapi

import (
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Where a reader of the watcher finds its token.
const (
	// TokenFileEnv names a file holding the bearer token a reader sends to the watcher; it
	// wins over TokenFile (processes outside a pod, tests).
	TokenFileEnv = "BERTH_WATCHER_TOKEN_FILE"
	// TokenFile is where Berth's pods mount a projected service-account token for the watcher:
	// audience TokenAudience, so the token is refused by the API server and by anything but the
	// watcher, and a watcher that leaked it leaks no API access.
	TokenFile = "/var/run/secrets/berth/loadwatcher/token"
	// TokenAudience is the audience of that token (the chart's loadWatcher.tokenAudience default).
	TokenAudience = "berth-loadwatcher"
	// tokenReread: kubelet rotates projected tokens at 80 % of their lifetime (an hour at
	// least); reading the file once a minute follows a rotation long before the old one expires.
	tokenReread = time.Minute
)

// ReadTokenHeader carries a reader's bearer token where Authorization cannot: the API server's
// service proxy consumes Authorization (it authenticates the caller with it and deletes it) and
// forwards other headers. The watcher checks a token from either header the same way.
const ReadTokenHeader = "X-Berth-Watcher-Authorization"

// DefaultTokenFile is the reader token file of this process: $BERTH_WATCHER_TOKEN_FILE, else
// TokenFile where it exists, else "" (no token: the watcher must allow anonymous reads).
func DefaultTokenFile() string {
	if f := os.Getenv(TokenFileEnv); f != "" {
		return f
	}
	if _, err := os.Stat(TokenFile); err == nil {
		return TokenFile
	}
	return ""
}

// TokenTransport adds "Authorization: Bearer <token>" from File to every request, re-reading
// the file at most once a minute. A file that cannot be read sends no token: the watcher's
// 401 then names what is missing, where a client-side error would hide it.
type TokenTransport struct {
	File string
	Base http.RoundTripper

	mu     sync.Mutex
	token  string
	readAt time.Time
}

// NewTokenTransport wraps base (nil: http.DefaultTransport); file "" adds nothing.
func NewTokenTransport(base http.RoundTripper, file string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if file == "" {
		return base
	}
	return &TokenTransport{File: file, Base: base}
}

// Token returns the current token ("" when the file cannot be read).
func (t *TokenTransport) Token() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.readAt.IsZero() || time.Since(t.readAt) >= tokenReread {
		if b, err := os.ReadFile(t.File); err == nil {
			t.token = strings.TrimSpace(string(b))
		}
		t.readAt = time.Now()
	}
	return t.token
}

// RoundTrip implements http.RoundTripper.
func (t *TokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok := t.Token()
	if tok == "" || r.Header.Get("Authorization") != "" {
		return t.Base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.Base.RoundTrip(r)
}

// RefusalDetail reads the start of a non-200 answer for the caller's error: the watcher's 401
// and 403 say which token or permission is missing, and a log that drops it leaves an operator
// guessing. Bounded, single line.
func RefusalDetail(resp *http.Response) string {
	b := make([]byte, 512)
	n, _ := io.ReadFull(resp.Body, b)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(strings.TrimSpace(string(b[:n])), "\n")
	if line == "" {
		return ""
	}
	return ": " + line
}
