package berthctl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sched/berth/pkg/placedload"
)

// The scheduler's answer, its refusal and another server's page each come back as one clear
// result.
func TestReadPlaced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr string
		wantCPU int64
	}{
		{"the recorded answer", http.StatusOK, recordedPlaced, "", 300},
		{"no get on the URL", http.StatusForbidden, "forbidden", "need get on the non-resource URL /debug/berth/placed", 0},
		{"another server", http.StatusOK, "<html>", "not a berth-scheduler answer", 0},
		{"a server error", http.StatusInternalServerError, "boom", "answered 500: boom", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != placedload.Path {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			ans, err := ReadPlaced(context.Background(), srv.Client(), srv.URL, "scheduler test")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(ans.Profiles) != 2 || ans.Profiles[0].Nodes["busy"].MilliCPU != tc.wantCPU {
				t.Fatalf("answer %+v, %v", ans, err)
			}
		})
	}
}
