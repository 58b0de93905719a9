package chart

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// agent.criSocket takes any absolute path whose directory can be mounted (issue 20: the local
// cluster's socket lives under .cache), and refuses what cannot be a socket's host path, naming
// the field.
func TestCRISocketSchema(t *testing.T) {
	for _, tc := range []struct {
		name, socket string
		ok           bool
	}{
		{"containerd", "/run/containerd/containerd.sock", true},
		{"CRI-O", "/var/run/crio/crio.sock", true},
		{"k3s", "/run/k3s/containerd/containerd.sock", true},
		{"the local cluster under .cache", "/work/main/.cache/local-cluster/cluster/node/containerd/containerd.sock", true},
		{"a hidden socket file", "/run/containerd/.containerd.sock", true},
		{"dots inside names", "/opt/cri-1.2/x..y/...sock", true},
		{"names starting with two dots", "/run/..data/cri.sock", true},
		{"unset", "", true},
		{"directly under /: its directory would be the host's root", "/containerd.sock", false},
		{"relative", "run/containerd/containerd.sock", false},
		{"a .. component", "/run/../containerd.sock", false},
		{"a trailing .. component", "/run/containerd/..", false},
		{"a . component", "/run/./containerd/containerd.sock", false},
		{"an empty component", "/run//containerd.sock", false},
		{"a trailing slash", "/run/containerd/", false},
		{"only blanks", " ", false},
		{"a blank inside", "/run/my containerd/containerd.sock", false},
		{"a newline", "/run/containerd/containerd.sock\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render("berth", "berth-system", map[string]any{"agent": map[string]any{"criSocket": tc.socket}})
			switch {
			case tc.ok && err != nil:
				t.Errorf("%q refused: %v", tc.socket, err)
			case !tc.ok && err == nil:
				t.Errorf("%q rendered; want a schema error", tc.socket)
			case !tc.ok && !strings.Contains(err.Error(), "/agent/criSocket"):
				t.Errorf("%q: error %q does not name /agent/criSocket", tc.socket, err)
			}
		})
	}
}

// The DaemonSet mounts the socket's directory as given, whatever YAML would make of its
// characters, and passes the socket's name inside the mount.
func TestCRISocketRendering(t *testing.T) {
	for _, tc := range []struct{ socket, wantDir, wantArg string }{
		{"/run/containerd/containerd.sock", "/run/containerd", "--cri-socket=/run/berth/cri/containerd.sock"},
		{"/work/main/.cache/local-cluster/cluster/node/containerd/containerd.sock",
			"/work/main/.cache/local-cluster/cluster/node/containerd", "--cri-socket=/run/berth/cri/containerd.sock"},
		// YAML flow indicators and a comment sign: quoted, they stay part of the path.
		{"/srv/a,b/{c}/#d/cri:x.sock", "/srv/a,b/{c}/#d", "--cri-socket=/run/berth/cri/cri:x.sock"},
		{"/srv/a|b/cri.sock", "/srv/a|b", "--cri-socket=/run/berth/cri/cri.sock"},
	} {
		t.Run(tc.socket, func(t *testing.T) {
			r, err := Render("berth", "berth-system", map[string]any{"agent": map[string]any{"criSocket": tc.socket}})
			if err != nil {
				t.Fatal(err)
			}
			ds := agentDaemonSet(t, r)
			var dir string
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.Name == "cri-socket-dir" && v.HostPath != nil {
					dir = v.HostPath.Path
				}
			}
			if dir != tc.wantDir {
				t.Errorf("hostPath %q, want %q", dir, tc.wantDir)
			}
			args := ds.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, tc.wantArg) {
				t.Errorf("args %v lack %q", args, tc.wantArg)
			}
			probe := ds.Spec.Template.Spec.Containers[0].ReadinessProbe
			if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/readyz" {
				t.Errorf("readinessProbe %+v: want /readyz (which includes the image inventory)", probe)
			}
		})
	}
}

// A $(NODE_NAME) component makes one DaemonSet serve nodes whose runtimes listen at different
// paths: the directory above it is mounted and the kubelet expands the rest per pod
// (subPathExpr); anything else with "$(" is refused, naming the value.
func TestCRISocketPerNode(t *testing.T) {
	for _, tc := range []struct {
		socket, wantDir, wantSub, wantErr string
	}{
		{socket: "/work/c/cri/$(NODE_NAME)/containerd.sock", wantDir: "/work/c/cri", wantSub: "$(NODE_NAME)"},
		{socket: "/var/lib/nodes/$(NODE_NAME)/run/containerd/containerd.sock", wantDir: "/var/lib/nodes", wantSub: "$(NODE_NAME)/run/containerd"},
		{socket: "/run/containerd/containerd.sock", wantDir: "/run/containerd", wantSub: ""},
		{socket: "/$(NODE_NAME)/containerd.sock", wantErr: "may stand once, as a whole directory below the first"},
		{socket: "/nodes/$(NODE_NAME)/$(NODE_NAME)/c.sock", wantErr: "may stand once"},
		{socket: "/nodes/x$(NODE_NAME)/c.sock", wantErr: "may stand once"},
		{socket: "/nodes/$(NODE_NAME)x/c.sock", wantErr: "may stand once"},
		{socket: "/nodes/$(POD_NAME)/c.sock", wantErr: "no other $(...) is expanded"},
		{socket: "/nodes/n/$(NODE_NAME).sock", wantErr: "may stand once"},
	} {
		t.Run(tc.socket, func(t *testing.T) {
			r, err := Render("berth", "berth-system", map[string]any{"agent": map[string]any{"criSocket": tc.socket}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "agent.criSocket") {
					t.Fatalf("err %v, want one naming agent.criSocket and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := agentDaemonSet(t, r).Spec.Template.Spec
			var dir, sub string
			for _, v := range spec.Volumes {
				if v.Name == "cri-socket-dir" && v.HostPath != nil {
					dir = v.HostPath.Path
				}
			}
			var mounted bool
			for _, m := range spec.Containers[0].VolumeMounts {
				if m.Name == "cri-socket-dir" {
					mounted, sub = m.MountPath == "/run/berth/cri" && m.ReadOnly && m.SubPath == "", m.SubPathExpr
				}
			}
			if dir != tc.wantDir || sub != tc.wantSub || !mounted {
				t.Errorf("hostPath %q subPathExpr %q (read-only at /run/berth/cri: %v), want %q %q", dir, sub, mounted, tc.wantDir, tc.wantSub)
			}
			if !slices.Contains(spec.Containers[0].Args, "--cri-socket=/run/berth/cri/"+path.Base(tc.socket)) {
				t.Errorf("args %v", spec.Containers[0].Args)
			}
			if tc.wantSub != "" && !slices.ContainsFunc(spec.Containers[0].Env, func(e corev1.EnvVar) bool {
				return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}) {
				t.Errorf("subPathExpr needs NODE_NAME from spec.nodeName in the container's env: %+v", spec.Containers[0].Env)
			}
		})
	}
}

// NOTES say how to find why an agent is not Ready when the CRI socket is set (helm install
// --wait then times out on the agents), and what uninstall does with PodConfigs.
func TestNotesAgentReadinessAndUninstall(t *testing.T) {
	for _, tc := range []struct {
		name         string
		values       map[string]any
		want, absent []string
	}{{
		name:   "defaults",
		values: map[string]any{},
		want:   []string{"Agents: kubectl -n berth-system get daemonset berth-agent", "it stops the operator and the agents, deletes the NodeImages"},
		absent: []string{"proxy/readyz", "PodConfig"},
	}, {
		name:   "CRI socket set",
		values: map[string]any{"agent": map[string]any{"criSocket": "/work/main/.cache/local-cluster/cluster/node/containerd/containerd.sock"}},
		want: []string{"CRI socket /work/main/.cache/local-cluster/cluster/node/containerd/containerd.sock",
			"with a wrong agent.criSocket they fail, and Helm prints the hook's log naming each agent", "Job berth-agent-ready",
			"hostPath type check failed", "Image inventory not published",
			`kubectl get --raw "/api/v1/namespaces/berth-system/pods/<agent pod>:9101/proxy/readyz"`},
	}, {
		name: "PodConfig enabled",
		values: map[string]any{"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16"}},
			"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}},
		want: []string{"it deletes every PodConfig of the cluster and waits up to 120s", "the hook fails naming each one",
			`"When the`, "your PodNetworks, released"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			notes := renderNotes(t, tc.values)
			// NOTES wrap lines; compare with single spaces.
			flat := strings.Join(strings.Fields(notes), " ")
			for _, w := range tc.want {
				if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(flat, a) {
					t.Errorf("NOTES mention %q:\n%s", a, notes)
				}
			}
		})
	}
}

// The hook's ServiceAccount gets exactly what the hook does, per enabled feature, and the
// operator's own roles no longer carry the hook's deletions.
func TestCleanupHookRBAC(t *testing.T) {
	type rule struct{ scope, group, resource, verbs, names string }
	base := []rule{
		{"berth-system", "apps", "deployments", "get,patch", "berth-operator"},
		{"berth-system", "", "pods", "list", ""},
		{"berth-system", "berth.dev", "secondaryschedulers", "get,list,patch,delete", ""},
		{"berth-system", "coordination.k8s.io", "leases", "delete", ""},
		{"cluster", "rbac.authorization.k8s.io", "clusterroles", "list,delete", ""},
		{"cluster", "rbac.authorization.k8s.io", "clusterrolebindings", "list,delete", ""},
		{"cluster", "rbac.authorization.k8s.io", "rolebindings", "list", ""},
		{"kube-system", "rbac.authorization.k8s.io", "rolebindings", "delete", ""},
		// grants.enabled (default): the operator's Grants objects go once it is stopped.
		{"cluster", "berth.dev", "grants", "list,delete", ""},
	}
	noGrants := base[:len(base)-1]
	nodeImages := rule{"cluster", "berth.dev", "nodeimages", "list,delete", ""}
	agents := rule{"berth-system", "apps", "daemonsets", "get,delete", "berth-agent"}
	podConfig := []rule{{"cluster", "berth.dev", "podconfigs", "list,delete", ""}, {"cluster", "berth.dev", "ipallocations", "list,delete", ""},
		{"cluster", "berth.dev", "podnetworks", "list,patch", ""}}
	for _, tc := range []struct {
		name     string
		values   map[string]any
		want     []rule
		wantArgs []string
	}{
		{"defaults", map[string]any{}, append(append([]rule{}, base...), nodeImages), []string{"--cleanup-nodeimages", "--cleanup-grants"}},
		{"agent disabled", map[string]any{"agent": map[string]any{"enabled": false}}, base, []string{"--cleanup-grants"}},
		{"grants disabled", map[string]any{"grants": map[string]any{"enabled": false}}, append(append([]rule{}, noGrants...), nodeImages), []string{"--cleanup-nodeimages"}},
		{"CRI socket", map[string]any{"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}},
			append(append([]rule{}, base...), agents, nodeImages), []string{"--cleanup-agent-daemonset=berth-agent", "--cleanup-nodeimages", "--cleanup-grants"}},
		{"PodConfig", map[string]any{"podConfig": map[string]any{"enabled": true, "clusterCIDRs": []any{"10.244.0.0/16"}},
			"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}},
			append(append(append([]rule{}, base...), agents, nodeImages), podConfig...),
			[]string{"--cleanup-podconfigs", "--cleanup-agent-daemonset=berth-agent", "--cleanup-nodeimages", "--cleanup-grants"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render("berth", "berth-system", tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Objects(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			var got []rule
			bound := map[string]bool{}
			for _, o := range objs {
				var rules []rbacv1.PolicyRule
				scope := "cluster"
				switch o.GetKind() {
				case "Role", "ClusterRole":
					var role rbacv1.ClusterRole // same rules field
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
						t.Fatal(err)
					}
					rules = role.Rules
					if o.GetKind() == "Role" {
						scope = o.GetNamespace()
					}
				case "RoleBinding", "ClusterRoleBinding":
					var b rbacv1.ClusterRoleBinding
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
						t.Fatal(err)
					}
					for _, s := range b.Subjects {
						if s.Name == "berth-operator-cleanup" {
							bound[o.GetKind()+"/"+o.GetNamespace()+"/"+b.RoleRef.Name] = true
						}
					}
					continue
				default:
					continue
				}
				if !strings.HasSuffix(o.GetName(), "berth-operator-cleanup") {
					if o.GetName() == "berth-operator" && o.GetKind() == "Role" {
						for _, r := range rules {
							if slices.Contains(r.Resources, "leases") && slices.Contains(r.Verbs, "delete") {
								t.Errorf("the operator's Role still deletes Leases (the hook's job): %+v", r)
							}
						}
					}
					continue
				}
				for _, r := range rules {
					for _, res := range r.Resources {
						got = append(got, rule{scope, strings.Join(r.APIGroups, ","), res, strings.Join(r.Verbs, ","), strings.Join(r.ResourceNames, ",")})
					}
				}
			}
			if g, w := ruleSet(got), ruleSet(tc.want); g != w {
				t.Errorf("hook rules:\n got %s\nwant %s", g, w)
			}
			for _, b := range []string{"RoleBinding/berth-system/berth-operator-cleanup", "ClusterRoleBinding//berth-operator-cleanup",
				"RoleBinding/kube-system/berth-system:berth-operator-cleanup"} {
				if !bound[b] {
					t.Errorf("%s does not bind the hook's ServiceAccount (bound: %v)", b, bound)
				}
			}
			var job string
			for _, h := range r.Hooks {
				if h.Kind == "Job" && strings.HasSuffix(h.Path, "/cleanup-hook.yaml") {
					job = h.Manifest
				}
			}
			for _, a := range append([]string{"serviceAccountName: berth-operator-cleanup", "helm.sh/hook-output-log-policy: hook-failed"}, tc.wantArgs...) {
				if !strings.Contains(job, a) {
					t.Errorf("hook Job lacks %q:\n%s", a, job)
				}
			}
			for _, a := range []string{"--cleanup-podconfigs", "--cleanup-agent-daemonset", "--cleanup-nodeimages", "--cleanup-grants"} {
				if strings.Contains(job, a) && !slices.ContainsFunc(tc.wantArgs, func(w string) bool { return strings.HasPrefix(w, a) }) {
					t.Errorf("hook Job has %s, not wanted with these values", a)
				}
			}
		})
	}
}

func ruleSet[T any](rs []T) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%+v", r))
	}
	sort.Strings(out)
	return strings.Join(out, "\n     ")
}

func agentDaemonSet(t *testing.T, r *Rendered) *appsv1.DaemonSet {
	t.Helper()
	objs, err := Objects(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" && o.GetName() == "berth-agent" {
			ds := &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
			return ds
		}
	}
	t.Fatal("no agent DaemonSet rendered")
	return nil
}

// renderNotes renders NOTES.txt as `helm install` prints it (client-only, like Render).
func renderNotes(t *testing.T, values map[string]any) string {
	t.Helper()
	ch, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace, inst.KubeVersion = "berth", "berth-system", kv
	rel, err := inst.Run(ch, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Info.Notes
}

// With a CRI socket, install and upgrade wait for the agents through a hook (Helm's own --wait
// passes a DaemonSet with one unready pod), whose ServiceAccount only reads what it reports.
func TestAgentReadyHook(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   bool
	}{
		{"no CRI socket: no hook", map[string]any{}, false},
		{"CRI socket", map[string]any{"agent": map[string]any{"criSocket": "/run/containerd/containerd.sock"}}, true},
		{"agent disabled", map[string]any{"agent": map[string]any{"enabled": false, "criSocket": "/run/containerd/containerd.sock"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render("berth", "berth-system", tc.values)
			if err != nil {
				t.Fatal(err)
			}
			var job string
			for _, h := range r.Hooks {
				if h.Kind == "Job" && h.Name == "berth-agent-ready" {
					job = h.Manifest
				}
			}
			if (job != "") != tc.want {
				t.Fatalf("hook rendered %v, want %v", job != "", tc.want)
			}
			if !tc.want {
				return
			}
			for _, w := range []string{"helm.sh/hook: post-install,post-upgrade", "helm.sh/hook-output-log-policy: hook-failed",
				"serviceAccountName: berth-agent-ready", "--wait-agents-daemonset=berth-agent", "--wait-agents-namespace=berth-system",
				"--wait-agents-port=9101", "--wait-agents-timeout=300s"} {
				if !strings.Contains(job, w) {
					t.Errorf("hook lacks %q:\n%s", w, job)
				}
			}
			objs, err := Objects(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, o := range objs {
				if (o.GetKind() != "Role" && o.GetKind() != "ClusterRole") || o.GetName() != "berth-agent-ready" {
					continue
				}
				var role rbacv1.ClusterRole
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
					t.Fatal(err)
				}
				for _, r := range role.Rules {
					rules = append(rules, fmt.Sprintf("%s %v %v %v", o.GetKind(), r.Resources, r.Verbs, r.ResourceNames))
				}
			}
			want := []string{"ClusterRole [nodes] [get] []", "Role [daemonsets] [get] [berth-agent]", "Role [pods events] [list] []"}
			sort.Strings(rules)
			if strings.Join(rules, "; ") != strings.Join(want, "; ") {
				t.Errorf("rules %v, want %v", rules, want)
			}
		})
	}
}
