package webhook

import (
	"encoding/json"
	"net/http"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzAdmit feeds arbitrary pods (as the API server would serialise them) through the HTTP
// handler in every mode: it must answer 200 with the request's UID, never panic, never patch a
// refused pod, and a patch must apply, keep everything the pod had (schedulerName aside) and
// leave nothing to add on a second pass.
func FuzzAdmit(f *testing.F) {
	for _, p := range []*corev1.Pod{pod(classA, nil), pod(classA, withUserSpec), pod(map[string]string{"ipp-class": "a", "berth.dev/instance-class": "b"}, nil),
		pod(classA, func(p *corev1.Pod) { withUserSpec(p); p.OwnerReferences = []metav1.OwnerReference{rsRef} })} {
		b, _ := json.Marshal(p)
		for m := byte(0); m < 3; m++ {
			f.Add(b, m)
		}
	}
	f.Add([]byte(`{"metadata":{"labels":{"ipp-class":"x"}},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}}}}`), byte(1))
	f.Add([]byte(`{"metadata":{"labels":{"ipp-class":"x"}},"spec":{"tolerations":[],"affinity":{"podAntiAffinity":{}}}}`), byte(2))
	// Shapes reaching for the pool: unclassed with tolerations and node affinity, a classed DaemonSet pod.
	f.Add([]byte(`{"spec":{"tolerations":[{"operator":"Exists"},{"key":"ipp","operator":"Gt","value":"1"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{},{"matchExpressions":[{"key":"ipp","operator":"NotIn"}]}]}}}}}`), byte(0))
	f.Add([]byte(`{"metadata":{"labels":{"ipp-class":"x"},"ownerReferences":[{"kind":"DaemonSet","name":"d"}]},"spec":{"nodeSelector":{"ipp":"true"}}}`), byte(1))
	handlers := []*Handler{}
	for _, m := range []Mode{ModeIPP, ModeBerth, ModeBoth} {
		handlers = append(handlers, &Handler{Config: cfg(m), Log: logr.Discard()})
	}
	f.Fuzz(func(t *testing.T, raw []byte, mode byte) {
		h := handlers[int(mode)%len(handlers)]
		var p corev1.Pod
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		// The API server sends its own serialisation of the decoded object.
		canon, err := json.Marshal(&p)
		if err != nil {
			return
		}
		body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Create, Namespace: "ns",
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: canon}}})
		w := post(h, http.MethodPost, "application/json", body)
		if w.Code != http.StatusOK {
			t.Fatalf("HTTP %d %s", w.Code, w.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "u" {
			t.Fatalf("response %s: %v", w.Body, err)
		}
		r := out.Response
		if !r.Allowed {
			if len(r.Patch) > 0 || r.Result == nil || r.Result.Message == "" {
				t.Fatalf("refusal without a reason or with a patch: %+v", r)
			}
			return
		}
		if len(r.Patch) == 0 {
			return
		}
		patch, err := jsonpatch.DecodePatch(r.Patch)
		if err != nil {
			t.Fatalf("patch %s: %v", r.Patch, err)
		}
		res, err := patch.Apply(canon)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", r.Patch, canon, err)
		}
		var before, after any
		_ = json.Unmarshal(canon, &before)
		_ = json.Unmarshal(res, &after)
		if spec, ok := before.(map[string]any)["spec"].(map[string]any); ok {
			delete(spec, "schedulerName")
		}
		if path, ok := subset(before, after, ""); !ok {
			t.Fatalf("%s lost by patch %s\nbefore %s\nafter  %s", path, r.Patch, canon, res)
		}
		var got corev1.Pod
		if err := json.Unmarshal(res, &got); err != nil {
			t.Fatal(err)
		}
		if got.Namespace == "" {
			// why: the handler judges the pod in the request's namespace (the class's owner).
			got.Namespace = "ns"
		}
		if again, err := h.Config.Mutate(&got); err != nil || len(again.Patch) > 0 {
			t.Fatalf("second pass: %v %+v on %s", err, again.Patch, res)
		}
	})
}
