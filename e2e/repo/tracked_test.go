// Package repo tests the repository's own checks (hack/).
package repo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheckTracked runs hack/check-tracked.sh in a scratch git repository holding one file of
// each kind it must refuse or accept.
func TestCheckTracked(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	script, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "hack", "check-tracked.sh"))
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 2*1024*1024+1)
	tests := []struct {
		name    string
		path    string
		content []byte
		mode    os.FileMode
		refuse  string // "" = accepted
	}{
		{"source file", "main.go", []byte("package main\n"), 0o644, ""},
		{"script with the executable bit", "run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755, ""},
		{"ELF binary", "cmd/operator/operator", append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 64)...), 0o644, "tracked executable (binary)"},
		{"Mach-O binary", "tool", append([]byte{0xcf, 0xfa, 0xed, 0xfe}, make([]byte, 64)...), 0o644, "tracked executable (binary)"},
		{"executable bit, not a script", "data.bin", []byte("not a script"), 0o755, "mode 755, not a script"},
		{"over 2 MB", "dump.json", big, 0o644, "tracked file over 2 MB"},
		{"golden file over 2 MB", "testdata/render.golden.yaml", big, 0o644, ""},
		{"exactly 2 MB", "exact.txt", big[:2*1024*1024], 0o644, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			git("init", "-q")
			for path, c := range map[string][]byte{"hack/check-tracked.sh": script, tc.path: tc.content} {
				full := filepath.Join(dir, path)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, c, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(filepath.Join(dir, tc.path), tc.mode); err != nil {
				t.Fatal(err)
			}
			git("add", ".")
			git("commit", "-q", "-m", "x")
			out, err := exec.Command("bash", filepath.Join(dir, "hack", "check-tracked.sh")).CombinedOutput()
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tc.refuse) || !strings.Contains(string(out), tc.path) {
				t.Fatalf("err %v, output %q: want a refusal %q naming %s", err, out, tc.refuse, tc.path)
			}
		})
	}
}
