{{/* Prefix of every object's name: nameOverride, else the release name. */}}
{{- define "berth.prefix" -}}
{{- default .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.operator.name" -}}{{ include "berth.prefix" . }}-operator{{- end -}}
{{- define "berth.loadwatcher.name" -}}{{ include "berth.prefix" . }}-loadwatcher{{- end -}}
{{- define "berth.agent.name" -}}{{ include "berth.prefix" . }}-agent{{- end -}}
{{- define "berth.scheduler.name" -}}{{ default (printf "%s-scheduler" (include "berth.prefix" .)) .Values.scheduler.name }}{{- end -}}

{{/* Labels of every object; component is passed as .component. */}}
{{- define "berth.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: berth
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels: stable across upgrades (Deployment selectors are immutable). */}}
{{- define "berth.selector" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* A Berth image: the component's image.repository and image.tag, each defaulting to
global.image's (<registry>/<name>, tag). Called with (dict "root" $ "image" <component>.image
"name" "berth-<component>"). */}}
{{- define "berth.image" -}}
{{- $g := .root.Values.global.image -}}
{{- $repo := .image.repository | default (printf "%s/%s" (trimSuffix "/" $g.registry) .name) -}}
{{ $repo }}:{{ .image.tag | default $g.tag }}
{{- end -}}

{{- define "berth.pullPolicy" -}}{{ .image.pullPolicy | default .root.Values.global.image.pullPolicy }}{{- end -}}

{{/* The load watcher's URL as the scheduler and the agents use it. */}}
{{- define "berth.watcherURL" -}}
{{- $lw := .Values.loadWatcher -}}
{{- if $lw.url -}}
{{ $lw.url }}
{{- else if and $lw.service.clusterIP (ne $lw.service.clusterIP "None") -}}
http://{{ $lw.service.clusterIP }}:{{ $lw.service.port }}
{{- else -}}
http://{{ include "berth.loadwatcher.name" . }}.{{ .Release.Namespace }}.svc:{{ $lw.service.port }}
{{- end -}}
{{- end -}}

{{/* Restricted container security context (Pod Security "restricted"). */}}
{{- define "berth.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "berth.restrictedPod" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The plugin ClusterRole the operator creates for a SecondaryScheduler (pkg/operator.RBACPrefix). */}}
{{- define "berth.scheduler.pluginsRole" -}}
berth:{{ .Release.Namespace }}:{{ include "berth.scheduler.name" . }}-plugins
{{- end -}}

{{/* agent.criSocket's host directory and, when one component of it is the literal $(NODE_NAME)
(nodes whose runtimes listen at different paths, as on the local cluster's real nodes), the
subPathExpr below that directory that the kubelet expands per pod. Returns "hostDir subPath" (the schema keeps blanks out of the path). */}}
{{- define "berth.agent.criMount" -}}
{{- $s := .Values.agent.criSocket -}}
{{- $d := dir $s -}}
{{- $tok := "$(NODE_NAME)" -}}
{{- if contains "$(" $s -}}
{{- $parts := splitList (printf "/%s" $tok) $d -}}
{{- $rest := "" -}}
{{- if eq (len $parts) 2 }}{{ $rest = index $parts 1 }}{{ end -}}
{{- if or (ne (len $parts) 2) (contains "$(" (index $parts 0)) (contains "$(" $rest) (contains "$(" (base $s)) (eq (index $parts 0) "") (and $rest (not (hasPrefix "/" $rest))) -}}
{{- fail (printf "agent.criSocket %q: $(NODE_NAME) may stand once, as a whole directory below the first (e.g. /var/lib/nodes/$(NODE_NAME)/containerd.sock), and no other $(...) is expanded" $s) -}}
{{- end -}}
{{- printf "%s %s%s" (index $parts 0) $tok $rest -}}
{{- else -}}
{{- printf "%s " $d -}}
{{- end -}}
{{- end -}}
