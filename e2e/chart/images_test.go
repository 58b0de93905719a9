package chart

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var imageLineRe = regexp.MustCompile(`(?m)^\s*(image|imagePullPolicy): (\S+)$`)

// renderedImages lists the image: and imagePullPolicy: values of every rendered document
// (Deployments, the DaemonSet, the cleanup hook's Job and the SecondaryScheduler CR).
func renderedImages(t *testing.T, values string) (images, policies []string) {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &v); err != nil {
		t.Fatal(err)
	}
	r, err := Render("berth", "berth-system", v)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range imageLineRe.FindAllStringSubmatch(r.All(), -1) {
		if m[1] == "imagePullPolicy" {
			policies = append(policies, m[2])
			continue
		}
		if !seen[m[2]] {
			seen[m[2]] = true
			images = append(images, m[2])
		}
	}
	sort.Strings(images)
	return images, policies
}

// The chart's image names come from one place (global.image), so `make push REGISTRY=… TAG=…`
// and one pair of --set flags point every component at a registry; a component's own image
// still wins.
func TestImagesComeFromGlobal(t *testing.T) {
	cases := []struct {
		name, values string
		want         []string
		wantPolicy   string
	}{
		{"defaults: the local names make images and make up use", ``, []string{
			"localhost/berth/berth-agent:dev", "localhost/berth/berth-loadwatcher:dev",
			"localhost/berth/berth-operator:dev", "localhost/berth/berth-scheduler:dev"}, "IfNotPresent"},
		{"global registry and tag", `global: {image: {registry: "registry.example.com:5000/team/berth", tag: v0.1.0, pullPolicy: Always}}`, []string{
			"registry.example.com:5000/team/berth/berth-agent:v0.1.0", "registry.example.com:5000/team/berth/berth-loadwatcher:v0.1.0",
			"registry.example.com:5000/team/berth/berth-operator:v0.1.0", "registry.example.com:5000/team/berth/berth-scheduler:v0.1.0"}, "Always"},
		{"a trailing slash on the registry", `global: {image: {registry: "ghcr.io/me/"}}`, []string{
			"ghcr.io/me/berth-agent:dev", "ghcr.io/me/berth-loadwatcher:dev", "ghcr.io/me/berth-operator:dev", "ghcr.io/me/berth-scheduler:dev"}, "IfNotPresent"},
		{"a component's own repository and tag win", `{global: {image: {registry: ghcr.io/me, tag: v1}}, agent: {image: {repository: mirror.local/agent, tag: patched}}}`, []string{
			"ghcr.io/me/berth-loadwatcher:v1", "ghcr.io/me/berth-operator:v1", "ghcr.io/me/berth-scheduler:v1", "mirror.local/agent:patched"}, "IfNotPresent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			images, policies := renderedImages(t, tc.values)
			if strings.Join(images, " ") != strings.Join(tc.want, " ") {
				t.Errorf("images:\n got %v\nwant %v", images, tc.want)
			}
			// operator, cleanup hook, load watcher, agent and the SecondaryScheduler.
			if len(policies) < 5 {
				t.Errorf("only %d imagePullPolicy fields rendered: %v", len(policies), policies)
			}
			for _, p := range policies {
				if p != tc.wantPolicy {
					t.Errorf("imagePullPolicy %s, want %s (all: %v)", p, tc.wantPolicy, policies)
					break
				}
			}
		})
	}
}
