package operator

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-sched/berth/api/crds"
	"github.com/berth-sched/berth/e2e/chart"
	"github.com/berth-sched/berth/e2e/cluster"
	"github.com/berth-sched/berth/e2e/framework"
)

// TestUpgradeCRDs: the chart's pre-upgrade hook, `berth-operator --upgrade-crds`, on a real API
// server holding the previous release's CRDs (the SecondaryScheduler schema without a newer
// field, the Rebalancer CRD missing). Before it, the API server drops the new field from a
// SecondaryScheduler, as it would after a plain `helm upgrade`; after it, the field is kept,
// the missing CRD exists and is established, and a second run changes nothing. A CRD that
// stores a version this build does not have is refused, naming it, and no CRD is applied.
func TestUpgradeCRDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := framework.StartCluster(ctx, t, cluster.Config{Logf: t.Logf, WithoutKWOK: true, WithoutDefaultScheduler: true, WithoutBerthCRDs: true})
	ext, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	// The previous release: every CRD but the Rebalancer's, the SecondaryScheduler's without
	// estimateSeconds.
	files, err := crds.Files()
	if err != nil {
		t.Fatal(err)
	}
	var old []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		if f == "berth.dev_rebalancers.yaml" {
			continue
		}
		crd, err := crds.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if f == crds.SecondarySchedulerFile {
			for i := range crd.Spec.Versions {
				framework.DropSchemaProperty(crd.Spec.Versions[i].Schema.OpenAPIV3Schema, "estimateSeconds")
			}
		}
		old = append(old, crd)
	}
	if err := cluster.InstallCRDs(ctx, c.RESTConfig, old...); err != nil {
		t.Fatal(err)
	}
	const ns = "crd-upgrade"
	if err := framework.EnsureNamespace(ctx, c.Client, ns); err != nil {
		t.Fatal(err)
	}
	ssGVR := schema.GroupVersionResource{Group: "berth.dev", Version: "v1alpha1", Resource: "secondaryschedulers"}
	create := func(name string) int64 {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "berth.dev/v1alpha1", "kind": "SecondaryScheduler",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"image": "berth-scheduler:test", "schedulerName": name,
				"plugins": map[string]any{"targetLoadPacking": map[string]any{
					"args": map[string]any{"watcherAddress": "http://lw:2020", "estimateSeconds": int64(30)}}}},
		}}
		// Created as Helm 3 does (no server-side apply): the API server drops fields its schema
		// does not know, with only a warning.
		got, err := dyn.Resource(ssGVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldManager: "helm"})
		if err != nil {
			t.Fatalf("applying SecondaryScheduler %s: %v", name, err)
		}
		v, _, _ := unstructured.NestedInt64(got.Object, "spec", "plugins", "targetLoadPacking", "args", "estimateSeconds")
		return v
	}
	if v := create("before"); v != 0 {
		t.Fatalf("the old schema kept estimateSeconds (%d): this test no longer shows what a plain helm upgrade loses", v)
	}

	// The hook runs with the chart's rights for it, nothing more: none over other CRDs.
	kubeconfig := hookIdentity(ctx, t, c, ns)
	for _, verb := range []string{"get", "patch", "update", "delete"} {
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":berth-crd-upgrade",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions",
				Name: "seccompprofiles.security-profiles-operator.x-k8s.io", Verb: verb}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Errorf("the hook's identity may %s another project's CRD", verb)
		}
	}
	upgrade := func() (int, string) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "berth-operator"), "--kubeconfig="+kubeconfig, "--upgrade-crds", "--upgrade-crds-timeout=1m")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stderr.String()
	}
	for _, run := range []string{"first", "second"} {
		if code, log := upgrade(); code != 0 {
			t.Fatalf("%s --upgrade-crds: exit %d\n%s", run, code, log)
		}
		if v := create("after-" + run); v != 30 {
			t.Fatalf("after the %s --upgrade-crds run a SecondaryScheduler keeps estimateSeconds %d, want 30", run, v)
		}
		if err := cluster.WaitCRDEstablished(ctx, ext, "rebalancers.berth.dev", 10*time.Second); err != nil {
			t.Fatalf("after the %s run: %v", run, err)
		}
	}

	t.Run("a CRD storing a version this build lacks is refused and nothing is applied", func(t *testing.T) {
		crds := ext.ApiextensionsV1().CustomResourceDefinitions()
		// The refused CRD is applied last (files in name order), the changed one before it: a
		// run that stopped at the refusal would already have reverted the change.
		const refused, changed = "secondaryschedulers.berth.dev", "ipallocations.berth.dev"
		crd, err := crds.Get(ctx, refused, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A later release's storage version, with objects stored in it.
		next := crd.Spec.Versions[0].DeepCopy()
		next.Name = "v1beta9"
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = false
		}
		next.Storage = true
		crd.Spec.Versions = append(crd.Spec.Versions, *next)
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		other, err := crds.Get(ctx, changed, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		other.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "changed by hand"
		if _, err := crds.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		code, log := upgrade()
		if code != 1 || !strings.Contains(log, refused) || !strings.Contains(log, "v1beta9") || !strings.Contains(log, "nothing applied") {
			t.Fatalf("--upgrade-crds over a CRD storing v1beta9: exit %d, want 1 naming the CRD and the version, nothing applied:\n%s", code, log)
		}
		t.Logf("refused: %s", strings.TrimSpace(log))
		got, err := crds.Get(ctx, refused, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Spec.Versions); n != 2 {
			t.Errorf("the refused CRD has %d versions, want its 2 kept", n)
		}
		if got, err := crds.Get(ctx, changed, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else if d := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; d != "changed by hand" {
			t.Errorf("the refused run applied %s too (description %q)", changed, d)
		}
	})
	if err := dyn.Resource(ssGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// hookIdentity creates the ServiceAccount, ClusterRole and binding the chart's pre-upgrade hook
// runs with (rendered from the chart, release "berth" in ns) and returns a kubeconfig that
// impersonates that ServiceAccount.
func hookIdentity(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) string {
	t.Helper()
	r, err := chart.Render("berth", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	var created int
	for _, h := range r.Hooks {
		if !strings.HasSuffix(h.Path, "crd-upgrade-hook.yaml") {
			continue
		}
		objs, err := chart.Objects(h.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			var err error
			switch o.GetKind() {
			case "ServiceAccount":
				var sa corev1.ServiceAccount
				toTyped(t, o, &sa)
				_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{})
			case "ClusterRole":
				var cr rbacv1.ClusterRole
				toTyped(t, o, &cr)
				_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{})
			case "ClusterRoleBinding":
				var crb rbacv1.ClusterRoleBinding
				toTyped(t, o, &crb)
				_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &crb, metav1.CreateOptions{})
			default:
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
			}
			created++
		}
	}
	if created != 3 {
		t.Fatalf("the chart's crd-upgrade hook has %d identity objects, want a ServiceAccount, a ClusterRole and a binding", created)
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + ns + ":berth-crd-upgrade"
	}
	path := filepath.Join(t.TempDir(), "hook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func toTyped(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
