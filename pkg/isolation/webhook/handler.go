package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Path is where the API server posts AdmissionReviews.
const Path = "/mutate-pods"

// DefaultMaxBody bounds a request body. The API server caps an object at 3 MiB; an
// AdmissionReview carries the object once on CREATE (plus options and user info), so 4 MiB
// (what IPP used) leaves room without letting a caller make the operator buffer more.
const DefaultMaxBody = 4 << 20

var admissionV1 = admissionv1.SchemeGroupVersion.String()

// Handler answers AdmissionReview v1 requests for pods.
type Handler struct {
	Config  Config
	MaxBody int64
	Log     logr.Logger
	// Requests counts answers by outcome (patched, unchanged, exempt, refused, bad_request).
	Requests *prometheus.CounterVec
}

// NewRequestsCounter is berth_isolation_webhook_requests_total.
func NewRequestsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_isolation_webhook_requests_total",
		Help: "Admission requests the instance-isolation webhook answered, by mode and outcome.",
	}, []string{"mode", "outcome"})
}

func (h *Handler) count(outcome string) {
	if h.Requests != nil {
		h.Requests.WithLabelValues(string(h.Config.Mode), outcome).Inc()
	}
}

// fail answers a request that is not an AdmissionReview this webhook can read: the API
// server reports the status and message as the webhook's failure and applies failurePolicy.
func (h *Handler) fail(w http.ResponseWriter, code int, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	h.count("bad_request")
	h.Log.Info("refusing request", "status", code, "reason", msg)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, "instance-isolation webhook: "+msg+"\n")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, http.StatusMethodNotAllowed, "method %s: AdmissionReviews are POSTed", r.Method)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		h.fail(w, http.StatusUnsupportedMediaType, "content type %q: AdmissionReview v1 is sent as application/json", r.Header.Get("Content-Type"))
		return
	}
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.fail(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", limit)
			return
		}
		h.fail(w, http.StatusBadRequest, "reading the request: %v", err)
		return
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		h.fail(w, http.StatusBadRequest, "not JSON: %v", err)
		return
	}
	if tm.APIVersion != admissionV1 || tm.Kind != "AdmissionReview" {
		h.fail(w, http.StatusBadRequest, "unsupported %s %q: this webhook speaks AdmissionReview %s only (admissionReviewVersions: [v1])",
			orKind(tm.Kind), tm.APIVersion, admissionV1)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		h.fail(w, http.StatusBadRequest, "decoding the AdmissionReview: %v", err)
		return
	}
	if review.Request == nil || review.Request.UID == "" {
		h.fail(w, http.StatusBadRequest, "AdmissionReview without a request (or its uid)")
		return
	}
	resp := h.Admit(review.Request)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionV1, Kind: "AdmissionReview"}, Response: resp})
	if err != nil {
		h.fail(w, http.StatusInternalServerError, "encoding the response: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func orKind(k string) string {
	if k == "" {
		return "object"
	}
	return k
}

// Admit decides one request. It touches nothing but its answer, so dry-run requests
// (sideEffects: None) get the same answer a real one would, and leave nothing behind.
func (h *Handler) Admit(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	log := h.Log.WithValues("uid", req.UID, "namespace", req.Namespace, "name", req.Name, "dryRun", req.DryRun != nil && *req.DryRun)
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if isBinding(req) {
		return h.admitBinding(req, log)
	}
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != "" || req.Operation != admissionv1.Create {
		// why: the configuration sends only pod CREATEs; anything else is a misrouted call,
		// which the webhook has no business changing.
		h.count("unchanged")
		return allow
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		h.count("refused")
		return deny(http.StatusBadRequest, "instance isolation: cannot decode the pod: "+err.Error())
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	res, err := h.Config.Mutate(&pod)
	if err != nil {
		h.count("refused")
		log.Info("refused", "reason", err.Error())
		return deny(http.StatusBadRequest, "instance isolation: "+err.Error())
	}
	allow.Warnings = res.Warnings
	switch {
	case res.Exempt != "":
		h.count("exempt")
		log.V(1).Info("exempt", "class", res.Class, "why", res.Exempt)
		return allow
	case len(res.Patch) == 0:
		h.count("unchanged")
		return allow
	}
	patch, err := json.Marshal(res.Patch)
	if err != nil {
		h.count("refused")
		return deny(http.StatusInternalServerError, "instance isolation: encoding the patch: "+err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	allow.Patch, allow.PatchType = patch, &pt
	h.count("patched")
	log.V(1).Info("patched", "class", res.Class, "mode", h.Config.Mode, "ops", len(res.Patch))
	return allow
}

func deny(code int32, msg string) *admissionv1.AdmissionResponse {
	reason := metav1.StatusReasonBadRequest
	if code >= 500 {
		reason = metav1.StatusReasonInternalError
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
	}}
}
