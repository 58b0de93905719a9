{{/* Instance-isolation admission (templates/isolation-webhook.yaml, pkg/isolation/webhook). */}}
{{- define "berth.isolation.name" -}}{{ include "berth.prefix" . }}-instance-isolation{{- end -}}
{{- define "berth.isolation.service" -}}{{ include "berth.prefix" . }}-isolation-webhook{{- end -}}
{{- define "berth.isolation.secret" -}}{{ include "berth.prefix" . }}-isolation-webhook-tls{{- end -}}

{{/* The class label keys, as a JSON list: isolation.classLabels, else the plugin's, else the defaults. */}}
{{- define "berth.isolation.classLabels" -}}
{{- $ii := .Values.scheduler.plugins.instanceIsolation -}}
{{- $keys := .Values.isolation.classLabels | default ($ii.args | default dict).classLabels | default (list "ipp-class" "berth.dev/instance-class") -}}
{{ toJson $keys }}
{{- end -}}

{{/* CEL: the pod carries a non-empty class label. */}}
{{- define "berth.isolation.classed" -}}
has(object.metadata.labels) && {{ include "berth.isolation.classLabels" . }}.exists(k, k in object.metadata.labels && object.metadata.labels[k] != '')
{{- end -}}

{{/* Namespaces neither the webhook nor the policies look at, as a JSON list: the release's
(the operator must always be able to come back) and isolation.exemptNamespaces (default
kube-system, the control plane's node daemons). */}}
{{- define "berth.isolation.exemptNamespaces" -}}
{{ toJson (uniq (prepend (.Values.isolation.exemptNamespaces | default (list)) .Release.Namespace)) }}
{{- end -}}

{{- define "berth.isolation.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ include "berth.isolation.exemptNamespaces" . }}
{{- end -}}

{{/* CEL, over toleration t: t tolerates the pool taint, or may (Lt/Gt on its key count, as in
the webhook's mayTolerate). */}}
{{- define "berth.isolation.tolerates" -}}
{{- $t := .Values.isolation.pool.taint -}}
(!has(t.key) || t.key == '' || t.key == {{ $t.key | toJson }}) && (!has(t.effect) || t.effect == '' || t.effect == {{ $t.effect | toJson }}) &&
((has(t.operator) && t.operator in ['Exists', 'Gt', 'Lt']) || ((!has(t.operator) || t.operator == '' || t.operator == 'Equal') && (has(t.value) ? t.value : '') == {{ $t.value | toJson }}))
{{- end -}}

{{/* CEL, over node selector requirement e: a pool node satisfies it (the webhook's selectsPool). */}}
{{- define "berth.isolation.selects" -}}
{{- $l := .Values.isolation.pool.label -}}
e.key == {{ $l.key | toJson }} && ((e.operator == 'In' && has(e.values) && {{ $l.value | toJson }} in e.values) ||
(e.operator == 'NotIn' && !(has(e.values) && {{ $l.value | toJson }} in e.values)) || e.operator in ['Exists', 'Gt', 'Lt'])
{{- end -}}

{{/* CEL: the required node selector terms of .obj ("object" or "oldObject") exist. */}}
{{- define "berth.isolation.hasTerms" -}}
{{- $o := .obj -}}
has({{ $o }}.spec.affinity) && has({{ $o }}.spec.affinity.nodeAffinity) && has({{ $o }}.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) &&
has({{ $o }}.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms)
{{- end -}}

{{/* CEL: pod .obj ("object" or "oldObject"; .root is the chart's context) tolerates the pool
taint or selects the pool's nodes (nodeSelector, or a requirement of a required node affinity
term). */}}
{{- define "berth.isolation.poolAccess" -}}
{{- $l := .root.Values.isolation.pool.label -}}
{{- $o := .obj -}}
(has({{ $o }}.spec.tolerations) && {{ $o }}.spec.tolerations.exists(t, {{ include "berth.isolation.tolerates" .root }})) ||
(has({{ $o }}.spec.nodeSelector) && {{ $l.key | toJson }} in {{ $o }}.spec.nodeSelector && {{ $o }}.spec.nodeSelector[{{ $l.key | toJson }}] == {{ $l.value | toJson }}) ||
({{ include "berth.isolation.hasTerms" . }} &&
{{ $o }}.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, {{ include "berth.isolation.selects" .root }})))
{{- end -}}

{{/* CEL: the class label keys of object whose owner term is missing: {<key> In [class]} on the
host in namespaces NotIn a list for which .owners (CEL over that list, "v") holds. .root is the
chart's context; variables.class must be defined. */}}
{{- define "berth.isolation.missingOwnerTerms" -}}
{{- $pa := "object.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution" -}}
{{ include "berth.isolation.classLabels" .root }}.filter(k, !(has(object.spec.affinity) && has(object.spec.affinity.podAntiAffinity) && has({{ $pa }}) &&
{{ $pa }}.exists(t, t.topologyKey == 'kubernetes.io/hostname' &&
has(t.labelSelector) && (!has(t.labelSelector.matchLabels) || size(t.labelSelector.matchLabels) == 0) &&
has(t.labelSelector.matchExpressions) && size(t.labelSelector.matchExpressions) == 1 &&
t.labelSelector.matchExpressions[0].key == k && t.labelSelector.matchExpressions[0].operator == 'In' &&
has(t.labelSelector.matchExpressions[0].values) && t.labelSelector.matchExpressions[0].values == [variables.class] &&
has(t.namespaceSelector) && (!has(t.namespaceSelector.matchLabels) || size(t.namespaceSelector.matchLabels) == 0) &&
has(t.namespaceSelector.matchExpressions) && size(t.namespaceSelector.matchExpressions) == 1 &&
t.namespaceSelector.matchExpressions[0].key == 'kubernetes.io/metadata.name' && t.namespaceSelector.matchExpressions[0].operator == 'NotIn' &&
has(t.namespaceSelector.matchExpressions[0].values) && [t.namespaceSelector.matchExpressions[0].values].all(v, {{ .owners }}))))
{{- end -}}

{{/* CEL: pod .obj has an owner reference of kind DaemonSet. */}}
{{- define "berth.isolation.daemonSetOwned" -}}
has({{ .obj }}.metadata.ownerReferences) && {{ .obj }}.metadata.ownerReferences.exists(o, o.kind == 'DaemonSet')
{{- end -}}

{{/* Who may bind pods to the pool's nodes, as a JSON list of usernames: the schedulers of the
classes. berth-scheduler's ServiceAccount (the operator names it after the SecondaryScheduler),
and in mode ipp, where the default scheduler places classed pods, system:kube-scheduler. Anyone
else's Binding to a pool node is refused (templates/isolation-webhook.yaml). */}}
{{- define "berth.isolation.poolBinders" -}}
{{- $b := list -}}
{{- if .Values.scheduler.enabled -}}
{{- $b = append $b (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "berth.scheduler.name" .)) -}}
{{- end -}}
{{- if eq .Values.isolation.mode "ipp" -}}
{{- $b = append $b "system:kube-scheduler" -}}
{{- end -}}
{{ toJson (uniq (concat $b (.Values.isolation.extraPoolBinders | default (list)))) }}
{{- end -}}

{{/* CEL: the pod names a node (spec.nodeName set at creation: never scheduled) and is no
static pod's mirror (the kubelet's, written whatever the API server answers). */}}
{{- define "berth.isolation.namesNode" -}}
has(object.spec.nodeName) && object.spec.nodeName != '' && (!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in object.metadata.annotations))
{{- end -}}

{{/* The autoscaler marker's node label key (pkg/isolation/classmarker.Key). */}}
{{- define "berth.isolation.markerKey" -}}node-restriction.kubernetes.io/berth-instance-class{{- end -}}

{{/* CEL: pod object selects the marker key in its nodeSelector or any node-affinity term
(required or preferred) by anything but DoesNotExist (which only keeps off marked nodes). */}}
{{- define "berth.isolation.mentionsMarker" -}}
{{- $mk := include "berth.isolation.markerKey" . | toJson -}}
{{- $na := "object.spec.affinity.nodeAffinity" -}}
(has(object.spec.nodeSelector) && {{ $mk }} in object.spec.nodeSelector) ||
(has(object.spec.affinity) && has({{ $na }}) &&
((has({{ $na }}.requiredDuringSchedulingIgnoredDuringExecution) && has({{ $na }}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) &&
{{ $na }}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == {{ $mk }} && e.operator != 'DoesNotExist'))) ||
(has({{ $na }}.preferredDuringSchedulingIgnoredDuringExecution) &&
{{ $na }}.preferredDuringSchedulingIgnoredDuringExecution.exists(p, has(p.preference) && has(p.preference.matchExpressions) && p.preference.matchExpressions.exists(e, e.key == {{ $mk }} && e.operator != 'DoesNotExist')))))
{{- end -}}

{{/* Checks values that the schema cannot relate to each other. */}}
{{- define "berth.isolation.check" -}}
{{- $iso := .Values.isolation -}}
{{- $ii := .Values.scheduler.plugins.instanceIsolation -}}
{{- if not .Values.operator.enabled -}}
{{- fail "isolation.enabled: the webhook is served by the operator; set operator.enabled" -}}
{{- end -}}
{{- if and (ne $iso.mode "ipp") (not (and .Values.scheduler.enabled $ii.enabled)) -}}
{{- fail (printf "isolation.mode %s: InstanceIsolation enforces it; set scheduler.enabled and scheduler.plugins.instanceIsolation.enabled (or use mode ipp)" $iso.mode) -}}
{{- end -}}
{{- $iiLabels := ($ii.args | default dict).classLabels -}}
{{- if and $iso.classLabels $iiLabels (ne (toJson $iso.classLabels) (toJson $iiLabels)) -}}
{{- fail "isolation.classLabels and scheduler.plugins.instanceIsolation.args.classLabels differ: the webhook and the plugin must read the same labels (set one of them)" -}}
{{- end -}}
{{- end -}}

{{/* The operator's --isolation-* arguments (templates/operator.yaml). */}}
{{- define "berth.isolation.args" -}}
{{- $iso := .Values.isolation -}}
{{- $ii := .Values.scheduler.plugins.instanceIsolation -}}
- --isolation-webhook
- --isolation-mode={{ $iso.mode }}
- --isolation-class-labels={{ join "," (fromJsonArray (include "berth.isolation.classLabels" .)) }}
- --isolation-pool-label={{ $iso.pool.label.key }}={{ $iso.pool.label.value }}
- --isolation-pool-taint={{ $iso.pool.taint.key }}={{ $iso.pool.taint.value }}:{{ $iso.pool.taint.effect }}
- --isolation-scheduler-name={{ .Values.scheduler.schedulerName }}
{{- if and (eq $iso.mode "both") $ii.isolatedProfileName }}
- --isolation-isolated-scheduler-name={{ $ii.isolatedProfileName }}
{{- end }}
- --isolation-spread-replicas={{ $iso.spreadReplicas }}
- --isolation-exempt-namespaces={{ join "," (fromJsonArray (include "berth.isolation.exemptNamespaces" .)) }}
- --isolation-pool-binders={{ join "," (fromJsonArray (include "berth.isolation.poolBinders" .)) }}
- --isolation-autoscaler-marker={{ $iso.autoscalerMarker.enabled }}
{{- if $iso.autoscalerMarker.enabled }}
- --isolation-marker-empty-grace={{ $iso.autoscalerMarker.emptyGrace }}
{{- end }}
- --isolation-webhook-bind-address=:9443
- --isolation-webhook-secret={{ .Release.Namespace }}/{{ include "berth.isolation.secret" . }}
{{- if $iso.certs.certManager.enabled }}
- --isolation-webhook-cert-management=external
{{- else }}
- --isolation-webhook-cert-management=operator
- --isolation-webhook-configuration={{ include "berth.isolation.name" . }}
- --isolation-webhook-cert-hosts={{ include "berth.isolation.service" . }}.{{ .Release.Namespace }}.svc,{{ include "berth.isolation.service" . }}.{{ .Release.Namespace }}.svc.cluster.local
- --isolation-webhook-ca-validity={{ $iso.certs.caValidity }}
- --isolation-webhook-cert-validity={{ $iso.certs.certValidity }}
{{- end }}
- --isolation-webhook-sync-interval={{ $iso.certs.syncInterval }}
{{- end -}}
