package webhook

import (
	"encoding/json"
	"net/http"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// isBinding: req creates a Binding, through the pod's binding subresource (what schedulers
// use) or the legacy namespaced bindings resource (the same storage, older path).
func isBinding(req *admissionv1.AdmissionRequest) bool {
	if req.Resource.Group != "" || req.Operation != admissionv1.Create {
		return false
	}
	return req.Resource.Resource == "pods" && req.SubResource == "binding" ||
		req.Resource.Resource == "bindings" && req.SubResource == ""
}

// admitBinding answers a Binding: refused when it puts a pod on a pool node and the requester
// is not one of the classes' schedulers (Config.AdmitBinding). Never patched.
func (h *Handler) admitBinding(req *admissionv1.AdmissionRequest, log logr.Logger) *admissionv1.AdmissionResponse {
	var b corev1.Binding
	if err := json.Unmarshal(req.Object.Raw, &b); err != nil {
		h.count("refused")
		return deny(http.StatusBadRequest, "instance isolation: cannot decode the binding: "+err.Error())
	}
	pod := b.Name
	if pod == "" {
		pod = req.Name
	}
	err := h.Config.AdmitBinding(BindingRequest{Namespace: req.Namespace, Pod: pod, Node: b.Target.Name, User: req.UserInfo.Username})
	if err != nil {
		h.count("refused")
		log.Info("binding refused", "node", b.Target.Name, "user", req.UserInfo.Username, "reason", err.Error())
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "instance isolation: " + err.Error(),
		}}
	}
	h.count("unchanged")
	return &admissionv1.AdmissionResponse{Allowed: true}
}
