package operator

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
	"github.com/berth-sched/berth/pkg/scheduler/schedconfig"
)

func testCR() *berthv1alpha1.SecondaryScheduler {
	return &berthv1alpha1.SecondaryScheduler{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "berth-system", UID: "uid-1"},
		Spec: berthv1alpha1.SecondarySchedulerSpec{SchedulerName: "berth-scheduler", Image: "img:1",
			LogLevel: berthv1alpha1.LogTrace, Replicas: ptr.To[int32](2)},
	}
}

func TestDeployment(t *testing.T) {
	ss := testCR()
	d := Deployment(ss, &schedconfig.Rendered{Hash: "abc"})
	pod := d.Spec.Template
	c := pod.Spec.Containers[0]
	checks := []struct {
		name string
		ok   bool
	}{
		{"config hash on the pod template (rolls on change)", pod.Annotations[AnnotationConfigHash] == "abc"},
		{"config flag", c.Args[0] == "--config=/etc/berth/config.yaml"},
		{"log level Trace is -v=6", c.Args[1] == "-v=6"},
		{"replicas", *d.Spec.Replicas == 2},
		{"probes over HTTPS", c.LivenessProbe.HTTPGet.Scheme == "HTTPS" && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"restricted security context", *c.SecurityContext.AllowPrivilegeEscalation == false &&
			*c.SecurityContext.ReadOnlyRootFilesystem && *pod.Spec.SecurityContext.RunAsNonRoot &&
			c.SecurityContext.Capabilities.Drop[0] == "ALL"},
		{"owner reference is the controller", len(d.OwnerReferences) == 1 && *d.OwnerReferences[0].Controller && d.OwnerReferences[0].UID == "uid-1"},
		{"selector matches pod labels", d.Spec.Selector.MatchLabels[LabelInstance] == pod.Labels[LabelInstance]},
		{"service account", pod.Spec.ServiceAccountName == "s"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("%s: not satisfied", ch.name)
		}
	}
}

// Objects in the resource's namespace are garbage collected through owner references; the
// others (cluster-scoped, kube-system) must not carry one (GC would treat it as invalid) and are
// found by label by the finalizer instead.
func TestRBACOwnership(t *testing.T) {
	ss := testCR()
	o := RBAC(ss)
	n := 0
	o.Each(func(obj metav1.Object) {
		n++
		l := obj.GetLabels()
		if l[LabelOwnerNamespace] != "berth-system" || l[LabelOwnerName] != "s" {
			t.Errorf("%s: labels %v", obj.GetName(), l)
		}
		if !strings.HasPrefix(obj.GetName(), "berth:berth-system:s-") {
			t.Errorf("%s: not prefixed with the owner", obj.GetName())
		}
		owned := len(obj.GetOwnerReferences()) > 0
		if owned != (obj.GetNamespace() == "berth-system") {
			t.Errorf("%s in %q: owner reference %v", obj.GetName(), obj.GetNamespace(), owned)
		}
	})
	if n != 1+4+1+2 {
		t.Errorf("%d RBAC objects, want 8", n)
	}
	if got := o.Roles[0].Rules[1].ResourceNames; len(got) != 1 || got[0] != "berth-scheduler" {
		t.Errorf("lease role names %v, want the scheduler's Lease", got)
	}
}

// The Lease the cleanup deletes must be the one the scheduler elects on: the resourceName
// schedconfig.Render writes, with and without an explicit schedulerName.
func TestLeaseNameIsRenderedResourceName(t *testing.T) {
	for _, name := range []string{"sched-a", ""} {
		ss := testCR()
		ss.Spec.SchedulerName = name
		ss.Spec.Plugins = &berthv1alpha1.PluginSet{SySched: &berthv1alpha1.SySchedPlugin{}}
		r, err := schedconfig.Render(ss, nil)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			LeaderElection struct {
				ResourceName      string `json:"resourceName"`
				ResourceNamespace string `json:"resourceNamespace"`
			} `json:"leaderElection"`
		}
		if err := yaml.Unmarshal(r.YAML, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.LeaderElection.ResourceName != LeaseName(ss) || doc.LeaderElection.ResourceNamespace != ss.Namespace {
			t.Errorf("schedulerName %q: rendered Lease %s/%s, LeaseName %q", name,
				doc.LeaderElection.ResourceNamespace, doc.LeaderElection.ResourceName, LeaseName(ss))
		}
	}
}

// fakeClient is a fake API server holding objs (nil ones left out), with the operator's scheme.
func fakeClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range objs {
		if o != nil {
			b = b.WithObjects(o)
		}
	}
	return b.Build()
}
