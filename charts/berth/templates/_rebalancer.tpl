{{/* Hot-spot relief (templates/rebalancer.yaml, pkg/rebalancer). */}}
{{- define "berth.rebalancer.name" -}}{{ include "berth.prefix" . }}-rebalancer{{- end -}}

{{/* The operator's flags when the rebalancer is on. */}}
{{- define "berth.rebalancer.args" -}}
- --rebalancer
- --rebalancer-protected-namespaces={{ .Release.Namespace }}
{{- end -}}
