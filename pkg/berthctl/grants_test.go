package berthctl

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	berthv1alpha1 "github.com/berth-sched/berth/api/v1alpha1"
)

var grantsNow = time.Date(2026, 11, 28, 17, 0, 0, 0, time.UTC)

func blueGrants(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	mtu := int32(1400)
	g := &berthv1alpha1.Grants{
		TypeMeta: metav1.TypeMeta{APIVersion: berthv1alpha1.GroupVersion.String(), Kind: "Grants"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "blue", Name: berthv1alpha1.GrantsName,
			CreationTimestamp: metav1.NewTime(grantsNow.Add(-2 * time.Hour))},
		Status: berthv1alpha1.GrantsStatus{
			Networks: []berthv1alpha1.GrantedNetwork{
				{Name: "blue-net", CIDR: "192.168.71.0/24", Gateway: "192.168.71.1", MTU: &mtu, State: berthv1alpha1.GrantedNetworkAccepted,
					Routes: []berthv1alpha1.GrantedRoute{{Destination: "10.9.0.0/16"}, {Destination: "10.10.0.0/16", Via: "192.168.71.254"}}},
				{Name: "l2-only", CIDR: "192.168.73.0/24", State: berthv1alpha1.GrantedNetworkRefused},
			},
			InstanceClasses: []berthv1alpha1.GrantedInstanceClass{{Name: "gold", SharedWith: 1}, {Name: "solo", SharedWith: 0}},
			OwnClasses:      berthv1alpha1.OwnClassesStatement,
			Conditions: []metav1.Condition{{Type: berthv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Listed",
				Message: "2 PodNetworks and 2 InstanceClasses grant this namespace", LastTransitionTime: metav1.NewTime(grantsNow.Add(-90 * time.Second))}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// fakeGrantsClient serves objs as grants (created through the resource: the fake's guess of
// a resource from the kind Grants would be "grantses").
func fakeGrantsClient(t *testing.T, objs ...*unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GrantsResource: "GrantsList"})
	for _, o := range objs {
		if _, err := dyn.Resource(GrantsResource).Namespace(o.GetNamespace()).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return dyn
}

// TestGrantsGolden: what a tenant sees of its namespace's Grants (and of a namespace granted
// nothing), in every output.
func TestGrantsGolden(t *testing.T) {
	for _, tc := range []struct {
		name, ns, output string
	}{
		{"grants.table.golden", "blue", "table"},
		{"grants.json.golden", "blue", "json"},
		{"grants.yaml.golden", "blue", "yaml"},
		{"grants.none.table.golden", "red", "table"},
		{"grants.none.json.golden", "red", "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view, err := CollectGrants(context.Background(), fakeGrantsClient(t, blueGrants(t)), tc.ns, grantsNow)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := WriteGrants(&out, view, tc.output); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, out.Bytes())
		})
	}
}

// TestGrantsErrors: each refusal by the API server becomes one sentence saying what to do.
func TestGrantsErrors(t *testing.T) {
	gr := GrantsResource.GroupResource()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"forbidden", apierrors.NewForbidden(gr, "grants", nil), "you may not get grants in namespace blue: ask for the built-in view role there"},
		{"unauthorized", apierrors.NewUnauthorized("who"), "does not accept your credentials"},
		{"other", apierrors.NewInternalError(errString("etcd down")), "cannot get grants in namespace blue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := fakeGrantsClient(t)
			dyn.PrependReactor("get", "grants", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			_, err := CollectGrants(context.Background(), dyn, "blue", grantsNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestGrantsMainUsage: bad usage is 2 and says why; an API server that refuses is 1 with the
// sentence above.
func TestGrantsMainUsage(t *testing.T) {
	kc := forbiddingAPIServer(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-o", "wide"}, 2, "--output must be table, json or yaml"},
		{[]string{"blue"}, 2, "takes no arguments"},
		{[]string{"--kubeconfig", kc, "-n", "blue"}, 1, "error: you may not get grants in namespace blue"},
	} {
		var stdout, stderr bytes.Buffer
		code := GrantsMain(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
