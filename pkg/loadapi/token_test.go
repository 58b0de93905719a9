package loadapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestTokenTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, preset, want string
	}{
		{"token from the file, trimmed", file, "", "Bearer tok-1"},
		{"no file configured: nothing sent", "", "", ""},
		{"unreadable file: nothing sent (the watcher's 401 says why)", filepath.Join(dir, "missing"), "", ""},
		{"a caller's own header is kept", file, "Bearer mine", "Bearer mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			c := &http.Client{Transport: NewTokenTransport(nil, tc.file)}
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if tc.preset != "" {
				req.Header.Set("Authorization", tc.preset)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("Authorization = %q, want %q", got, tc.want)
			}
		})
	}
	t.Setenv(TokenFileEnv, file)
	if f := DefaultTokenFile(); f != file {
		t.Fatalf("DefaultTokenFile() = %q with %s set", f, TokenFileEnv)
	}
}
