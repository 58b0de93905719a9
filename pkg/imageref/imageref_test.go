package imageref

import (
	"strings"
	"testing"
)

const dg = "sha256:4c0fdaa8b6341bfdeca5f18f7837462c80cff90527ee35ef185571e1c327beac"

func TestNormalize(t *testing.T) {
	cases := []struct {
		in                      string
		name, tag, digest, full string
		err                     string
	}{
		// why: the kind/containerd mismatch upstream never fixed (kubernetes#112699).
		{in: "nginx", name: "docker.io/library/nginx", tag: "latest", full: "docker.io/library/nginx:latest"},
		{in: "nginx:1.16", name: "docker.io/library/nginx", tag: "1.16", full: "docker.io/library/nginx:1.16"},
		{in: "library/nginx:1.16", name: "docker.io/library/nginx", tag: "1.16", full: "docker.io/library/nginx:1.16"},
		{in: "docker.io/nginx:1.16", name: "docker.io/library/nginx", tag: "1.16", full: "docker.io/library/nginx:1.16"},
		{in: "docker.io/library/nginx:1.16", name: "docker.io/library/nginx", tag: "1.16", full: "docker.io/library/nginx:1.16"},
		// why: "index.docker.io" is legacy spelling of the same registry.
		{in: "index.docker.io/library/nginx:1.16", name: "docker.io/library/nginx", tag: "1.16", full: "docker.io/library/nginx:1.16"},
		{in: "bitnami/redis:7", name: "docker.io/bitnami/redis", tag: "7", full: "docker.io/bitnami/redis:7"},
		// why: a port must not be mistaken for a tag, nor the registry for a Hub user.
		{in: "registry.local:5000/team/app", name: "registry.local:5000/team/app", tag: "latest", full: "registry.local:5000/team/app:latest"},
		{in: "registry.local:5000/team/app:v2", name: "registry.local:5000/team/app", tag: "v2", full: "registry.local:5000/team/app:v2"},
		{in: "localhost/berth/hello:v1", name: "localhost/berth/hello", tag: "v1", full: "localhost/berth/hello:v1"},
		{in: "localhost:5000/hello", name: "localhost:5000/hello", tag: "latest", full: "localhost:5000/hello:latest"},
		{in: "registry.k8s.io/pause:3.10.1", name: "registry.k8s.io/pause", tag: "3.10.1", full: "registry.k8s.io/pause:3.10.1"},
		// why: a digest-only reference must not gain :latest (it would match a different image).
		{in: "nginx@" + dg, name: "docker.io/library/nginx", digest: dg, full: "docker.io/library/nginx@" + dg},
		{in: "quay.io/org/app@" + dg, name: "quay.io/org/app", digest: dg, full: "quay.io/org/app@" + dg},
		{in: "nginx:1.16@" + dg, name: "docker.io/library/nginx", tag: "1.16", digest: dg, full: "docker.io/library/nginx:1.16@" + dg},
		{in: "[::1]:5000/app:v1", name: "[::1]:5000/app", tag: "v1", full: "[::1]:5000/app:v1"},

		{in: "", err: "empty"},
		{in: "Nginx:1.16", err: "lowercase"},
		{in: "docker.io/Library/nginx", err: "lowercase"},
		{in: "nginx:", err: "invalid reference format"},
		{in: "nginx@sha256:abc", err: "invalid"},
		{in: "nginx@md5:" + strings.Repeat("a", 32), err: "unsupported digest algorithm"},
		{in: "-nginx", err: "invalid reference format"},
		{in: "nginx:tag with space", err: "invalid reference format"},
		{in: strings.Repeat("a", 64), err: "64-byte hexadecimal"},
		{in: "nginx:" + strings.Repeat("t", 129), err: "invalid reference format"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			r, err := Normalize(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Normalize(%q) = %+v, %v; want error containing %q", tc.in, r, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tc.in, err)
			}
			if r.Name != tc.name || r.Tag != tc.tag || r.Digest != tc.digest || r.String() != tc.full {
				t.Fatalf("Normalize(%q) = %+v (%s); want name %q tag %q digest %q (%s)", tc.in, r, r, tc.name, tc.tag, tc.digest, tc.full)
			}
			// why: normalisation must be idempotent, or the agent's and the plugin's keys drift
			// when one side feeds the other's output back in.
			again, err := Normalize(r.String())
			if err != nil || again != r {
				t.Fatalf("Normalize(Normalize(%q)) = %+v, %v; want %+v", tc.in, again, err, r)
			}
		})
	}
}

func TestForms(t *testing.T) {
	cases := []struct {
		in               string
		tagged, digested string
		keys             []string
	}{
		{in: "nginx:1.16", tagged: "docker.io/library/nginx:1.16", keys: []string{"docker.io/library/nginx:1.16"}},
		{in: "nginx@" + dg, digested: "docker.io/library/nginx@" + dg, keys: []string{"docker.io/library/nginx@" + dg}},
		// why: with both, the digest is what the runtime pulls, so only it identifies the image.
		{in: "nginx:1.16@" + dg, tagged: "docker.io/library/nginx:1.16", digested: "docker.io/library/nginx@" + dg, keys: []string{"docker.io/library/nginx@" + dg}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			r, err := Normalize(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Tagged() != tc.tagged || r.Digested() != tc.digested {
				t.Fatalf("Tagged/Digested = %q/%q, want %q/%q", r.Tagged(), r.Digested(), tc.tagged, tc.digested)
			}
			if k := r.Keys(); strings.Join(k, ",") != strings.Join(tc.keys, ",") {
				t.Fatalf("Keys = %v, want %v", k, tc.keys)
			}
		})
	}
}
