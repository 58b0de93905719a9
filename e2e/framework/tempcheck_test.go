package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIsolateTemp(t *testing.T) {
	tests := []struct {
		name    string
		leave   []string // paths created under the private TMPDIR
		wantErr []string
	}{
		{"nothing left", nil, nil},
		{"other names are not ours to judge", []string{"go-build123/x"}, nil},
		{"a scheduler's default configuration", []string{"berth-scheduler-42/config.yaml"}, []string{"berth-scheduler-42 [config.yaml]"}},
		{"a fixture /proc", []string{"berth-cluster-7/demo-loadaware/a/proc/stat"}, []string{"berth-cluster-7 [demo-loadaware"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := os.Getenv("TMPDIR")
			check := IsolateTemp()
			dir := os.TempDir()
			if dir == before || !strings.HasPrefix(filepath.Base(dir), "berth-e2e-") {
				t.Fatalf("TMPDIR not isolated: %q", dir)
			}
			for _, p := range tc.leave {
				full := filepath.Join(dir, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := check()
			if os.Getenv("TMPDIR") != before {
				t.Fatalf("TMPDIR not restored: %q, want %q", os.Getenv("TMPDIR"), before)
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Fatalf("private directory %s not removed", dir)
			}
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("err = %v, want one: %v", err, len(tc.wantErr) > 0)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
