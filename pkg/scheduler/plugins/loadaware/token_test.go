package loadaware

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sched/berth/pkg/loadapi"
)

// TestWatcherSendsItsToken: the plugins' client sends the reader token the watcher checks, and a
// refusal's reason reaches the error (and so the scheduler's log), not only its status code.
func TestWatcherSendsItsToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sched-token" {
			http.Error(w, "forbidden: user \"x\" may not get nodeloads/pods.berth.dev", http.StatusForbidden)
			return
		}
		w.Write([]byte(`{"timestamp":1,"window":{"duration":"15m","start":0,"end":1},"source":"agent","data":{"NodeMetricsMap":{}}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	tests := []struct {
		name, token string
		wantErr     string
	}{
		{"token sent", "sched-token\n", ""},
		{"wrong token: the watcher's reason is in the error", "other", "may not get nodeloads/pods.berth.dev"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, "tok"+string(rune('a'+i)))
			if err := os.WriteFile(f, []byte(tc.token), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv(loadapi.TokenFileEnv, f)
			w := NewWatcher("TestPlugin", srv.URL, time.Second, time.Second, nil)
			err := w.Refresh(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
