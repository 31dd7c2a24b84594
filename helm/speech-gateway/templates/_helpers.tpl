{{- define "speech-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "speech-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "speech-gateway.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "speech-gateway.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "speech-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "speech-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "speech-gateway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "speech-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "speech-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "speech-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read: an existing one by name, the chart's own when it has a value, else none. */}}
{{- define "speech-gateway.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if or .Values.secret.upstreamCredentials .Values.secret.usageApiToken .Values.redis.url .Values.redis.password .Values.redis.sentinelPassword .Values.secret.clusterSecret }}
{{- include "speech-gateway.fullname" . }}
{{- end }}
{{- end }}

{{/*
Pod termination grace: the preStop sleep, then the drain (the handover of resumable sessions, up to
END_TIMEOUT_MS for their upstream to answer `end`; then DRAIN_SECONDS of the other running sessions,
then up to END_TIMEOUT_MS for theirs), then a margin for the exit. Less would have the kubelet kill
sessions the drain is still handing over or ending.
*/}}
{{- define "speech-gateway.minGraceSeconds" -}}
{{- $drain := int .Values.config.DRAIN_SECONDS }}
{{- $end := int (divf (float64 .Values.config.END_TIMEOUT_MS) 1000 | ceil) }}
{{- add .Values.preStopSleepSeconds $end $drain $end .Values.drainMarginSeconds }}
{{- end }}

{{- define "speech-gateway.graceSeconds" -}}
{{- $min := int (include "speech-gateway.minGraceSeconds" .) }}
{{- $set := .Values.terminationGracePeriodSeconds }}
{{- if kindIs "invalid" $set }}{{ $min }}
{{- else if lt (int $set) $min }}
{{- fail (printf "terminationGracePeriodSeconds %d is shorter than the drain needs: %d (preStopSleepSeconds + 2 x END_TIMEOUT_MS/1000 + DRAIN_SECONDS + drainMarginSeconds)" (int $set) $min) }}
{{- else }}{{ int $set }}
{{- end }}
{{- end }}

{{/* One port for two listeners: the gateway would fail to start. */}}
{{- define "speech-gateway.checkPorts" -}}
{{- if eq (int .Values.containerPort) (int .Values.adminPort) }}
{{- fail (printf "containerPort and adminPort are both %d: the client port and the admin port (metrics, usage API, hop) must differ" (int .Values.adminPort)) }}
{{- end }}
{{- end }}

{{/*
Without an upstream the gateway runs its embedded emulator and reports ready: an install that looks
healthy and transcribes nothing real. So the chart asks for one of the two explicitly.
*/}}
{{- define "speech-gateway.checkUpstream" -}}
{{- $upstream := or .Values.config.UPSTREAM_URL .Values.environments }}
{{- if and .Values.config.UPSTREAM_URL .Values.environments }}
{{- fail "environments and config.UPSTREAM_URL are both set: config.UPSTREAM_URL/AUTH_URL are the one-environment form. Use one of them." }}
{{- else if and .Values.config.ENVIRONMENTS .Values.environments }}
{{- fail "environments and config.ENVIRONMENTS are both set: with environments the chart writes ENVIRONMENTS. Unset config.ENVIRONMENTS." }}
{{- else if and .Values.environments .Values.config.DEFAULT_ENVIRONMENT (not (hasKey .Values.environments .Values.config.DEFAULT_ENVIRONMENT)) }}
{{- fail "config.DEFAULT_ENVIRONMENT is not one of environments." }}
{{- else if and $upstream .Values.emulator.enabled }}
{{- fail "emulator.enabled and config.UPSTREAM_URL (or environments) are both set: the emulator runs only without an upstream. Unset one of them." }}
{{- else if not (or $upstream .Values.emulator.enabled) }}
{{- fail "no upstream configured: set config.UPSTREAM_URL and config.AUTH_URL (the speech service), or environments (one upstream per environment), or emulator.enabled=true for the embedded emulator (development only: made-up transcripts)." }}
{{- end }}
{{- end }}
