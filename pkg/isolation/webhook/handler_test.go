package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func review(t *testing.T, p *corev1.Pod, mod func(*admissionv1.AdmissionRequest)) []byte {
	t.Helper()
	raw, _ := json.Marshal(p)
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("req-1"),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "ns", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw},
	}
	if mod != nil {
		mod(req)
	}
	b, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	return b
}

func post(h http.Handler, method, ctype string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, Path, bytes.NewReader(body))
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeResponse(t *testing.T, w *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", w.Code, w.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("response %s: %v", w.Body, err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != "req-1" {
		t.Fatalf("response envelope %s %s uid %q", out.APIVersion, out.Kind, out.Response.UID)
	}
	return out.Response
}

// TestHandlerAnswers: well-formed reviews get an AdmissionReview v1 answer with the request's
// UID: a JSON patch for a classed pod (the same for a dry run, which changes nothing else), a
// refusal naming the problem, or a plain allow.
func TestHandlerAnswers(t *testing.T) {
	h := &Handler{Config: cfg(ModeBerth), Log: logr.Discard(), Requests: NewRequestsCounter()}
	dry := true
	cases := []struct {
		name    string
		body    []byte
		allowed bool
		patched bool
		msg     string
	}{
		{"classed pod", review(t, pod(classA, withUserSpec), nil), true, true, ""},
		{"dry run", review(t, pod(classA, withUserSpec), func(r *admissionv1.AdmissionRequest) { r.DryRun = &dry }), true, true, ""},
		{"unclassed", review(t, pod(nil, nil), nil), true, false, ""},
		{"classed DaemonSet pod", review(t, pod(classA, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "d", UID: "u"}}
		}), nil), false, false, "metadata.ownerReferences[0]: pod of instance class a is owned by DaemonSet d"},
		{"unclassed pod tolerating the pool taint", review(t, pod(nil, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "ipp", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}), nil), false, false, "spec.tolerations[0]: tolerates the isolation pool taint ipp=true:NoSchedule"},
		{"classed DaemonSet pod in kube-system", review(t, pod(classA, func(p *corev1.Pod) {
			p.Namespace = ""
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "d", UID: "u"}}
		}), func(r *admissionv1.AdmissionRequest) { r.Namespace = "kube-system" }), true, false, ""},
		{"conflicting classes", review(t, pod(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, nil), nil), false, false, "conflicting instance classes"},
		{"invalid class", review(t, pod(map[string]string{"ipp-class": "-bad-"}, nil), nil), false, false, "not a valid label value"},
		{"not a pod body", review(t, nil, func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"spec":7}`) }), false, false, "cannot decode the pod"},
		{"update passes", review(t, pod(classA, nil), func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update }), true, false, ""},
		{"other resource passes", review(t, pod(classA, nil), func(r *admissionv1.AdmissionRequest) {
			r.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		}), true, false, ""},
	}
	var patches [][]byte
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := decodeResponse(t, post(h, http.MethodPost, "application/json", tc.body))
			if resp.Allowed != tc.allowed || (len(resp.Patch) > 0) != tc.patched {
				t.Fatalf("allowed %v patch %s, want allowed %v patched %v (%+v)", resp.Allowed, resp.Patch, tc.allowed, tc.patched, resp.Result)
			}
			if tc.patched {
				if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
					t.Errorf("patch type %v", resp.PatchType)
				}
				patches = append(patches, resp.Patch)
			}
			if tc.msg != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.msg) || resp.Result.Code != 400) {
				t.Errorf("result %+v, want 400 containing %q", resp.Result, tc.msg)
			}
		})
	}
	if len(patches) != 2 || !bytes.Equal(patches[0], patches[1]) {
		t.Errorf("a dry run must get the same patch as a real request: %s", bytes.Join(patches, []byte("\n")))
	}
	if got := testutil.ToFloat64(h.Requests.WithLabelValues("berth", "refused")); got != 5 {
		t.Errorf("refused counter %v, want 5", got)
	}
}

// TestHandlerBadRequests: what is not an AdmissionReview v1 gets an HTTP error with a reason
// (the API server shows it and applies failurePolicy), never a panic.
func TestHandlerBadRequests(t *testing.T) {
	h := &Handler{Config: cfg(ModeIPP), Log: logr.Discard(), MaxBody: 64 << 10}
	good := review(t, pod(classA, nil), nil)
	v1beta1 := bytes.Replace(good, []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1)
	big := append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"metadata":{"annotations":{"a":"`),
		bytes.Repeat([]byte("x"), 70<<10)...)
	big = append(big, []byte(`"}}}}}`)...)
	for _, tc := range []struct {
		name, method, ctype string
		body                []byte
		code                int
		msg                 string
	}{
		{"unknown version", http.MethodPost, "application/json", v1beta1, 400, `unsupported AdmissionReview "admission.k8s.io/v1beta1"`},
		{"no version", http.MethodPost, "application/json", []byte(`{"request":{}}`), 400, "speaks AdmissionReview admission.k8s.io/v1 only"},
		{"oversized", http.MethodPost, "application/json", big, 413, "exceeds 65536 bytes"},
		{"not JSON", http.MethodPost, "application/json", []byte("<xml/>"), 400, "not JSON"},
		{"no request", http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "without a request"},
		{"wrong content type", http.MethodPost, "application/yaml", good, 415, "application/json"},
		{"GET", http.MethodGet, "", nil, 405, "POSTed"},
	} {
		w := post(h, tc.method, tc.ctype, tc.body)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("%s: HTTP %d %q, want %d containing %q", tc.name, w.Code, w.Body, tc.code, tc.msg)
		}
	}
}
