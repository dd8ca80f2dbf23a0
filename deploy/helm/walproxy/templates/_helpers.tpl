{{/* Names ------------------------------------------------------------------------------------ */}}
{{- define "walproxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "walproxy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "walproxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "walproxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "broker") */}}
{{- define "walproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "walproxy.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "walproxy.brokerName" -}}{{ include "walproxy.fullname" . }}-broker{{- end -}}
{{- define "walproxy.brokerHeadless" -}}{{ include "walproxy.fullname" . }}-broker-headless{{- end -}}
{{- define "walproxy.controllerName" -}}{{ include "walproxy.fullname" . }}-controller{{- end -}}
{{- define "walproxy.controllerHeadless" -}}{{ include "walproxy.fullname" . }}-controller-headless{{- end -}}
{{- define "walproxy.configName" -}}{{ include "walproxy.fullname" . }}-config{{- end -}}

{{- define "walproxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "walproxy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* DNS name of broker pod N's sidecar: (dict "root" $ "id" N) */}}
{{- define "walproxy.brokerHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "walproxy.brokerName" .root) (int .id) (include "walproxy.brokerHeadless" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{- define "walproxy.controllerHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "walproxy.controllerName" .root) (int .ordinal) (include "walproxy.controllerHeadless" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* controller.quorum.voters: id@host:port,… (a static quorum, kraft.version 0) */}}
{{- define "walproxy.quorumVoters" -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.controllers.replicas) -}}
{{- $voters = append $voters (printf "%d@%s:%d" (add (int $.Values.controllers.nodeIdBase) $i) (include "walproxy.controllerHost" (dict "root" $ "ordinal" $i)) (int $.Values.controllers.port)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/*
controller.quorum.voters of the brokers: with walproxy.controllerThroughSidecar, voter V is the
sidecar's controller listener in the broker's own pod (127.0.0.1:controllerBase+V), which forwards
to V, so a dead sidecar stops its broker's heartbeats and the broker is fenced like a dead one.
*/}}
{{- define "walproxy.brokerQuorumVoters" -}}
{{- if .Values.walproxy.controllerThroughSidecar -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.controllers.replicas) -}}
{{- $id := add (int $.Values.controllers.nodeIdBase) $i -}}
{{- $voters = append $voters (printf "%d@127.0.0.1:%d" $id (add (int $.Values.walproxy.ports.controllerBase) $id)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- else -}}
{{- include "walproxy.quorumVoters" . -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes memory quantity (512Mi, 1Gi, 500M, 536870912) in bytes; empty for none. Only the
suffixes a container limit uses in practice: Ki Mi Gi Ti, k M G T.
*/}}
{{- define "walproxy.memoryBytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $m := regexFind "^[0-9]+" $q -}}
{{- $suffix := trimPrefix $m $q -}}
{{- if and $m (eq $suffix "") -}}{{ $m }}
{{- else if and $m (hasKey $units $suffix) -}}{{ mul (int64 $m) (get $units $suffix) }}
{{- else if $q -}}{{ fail (printf "walproxy.resources.limits.memory %q: use a whole number with Ki, Mi, Gi, Ti, k, M, G or T" $q) }}
{{- end -}}
{{- end -}}

{{/*
KRaft cluster id: the value, or derived from namespace and release (stable across upgrades):
21 hex digits and "A", a canonical base64url encoding of 16 bytes (the last character's unused
low bits are zero), as Kafka's Uuid.fromString expects.
*/}}
{{- define "walproxy.clusterId" -}}
{{- if .Values.kafka.clusterId -}}
{{- .Values.kafka.clusterId -}}
{{- else -}}
{{- printf "walproxy/%s/%s" .Release.Namespace .Release.Name | sha256sum | trunc 21 -}}A
{{- end -}}
{{- end -}}

{{- define "walproxy.image" -}}
{{- printf "%s:%s" .Values.walproxy.image.repository (default .Chart.AppVersion .Values.walproxy.image.tag) -}}
{{- end -}}

{{/* Every broker id, comma-separated: the egress ids of every sidecar (each pod has its own localhost). */}}
{{- define "walproxy.brokerIds" -}}
{{- $ids := list -}}
{{- range $i := until (int .Values.brokers.replicas) -}}{{- $ids = append $ids (toString $i) -}}{{- end -}}
{{- join "," $ids -}}
{{- end -}}

{{- define "walproxy.walEnabled" -}}
{{- if or .Values.walproxy.wal.storeUrl .Values.walproxy.wal.storeUrlByZone -}}true{{- end -}}
{{- end -}}

{{/* server.properties lines of a map, sorted; whole floats (YAML numbers) printed as integers. */}}
{{- define "walproxy.properties" -}}
{{- $lines := list -}}
{{- range $key, $value := . -}}
{{- $text := toString $value -}}
{{- if and (kindIs "float64" $value) (eq $value (floor $value)) -}}{{- $text = toString (int64 $value) -}}{{- end -}}
{{- $lines = append $lines (printf "%s=%s" $key $text) -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/* Settings the chart owns; values may not override them. */}}
{{- define "walproxy.validate" -}}
{{- $reserved := list "node.id" "process.roles" "listeners" "advertised.listeners" "listener.security.protocol.map" "inter.broker.listener.name" "controller.listener.names" "controller.quorum.voters" "controller.quorum.bootstrap.servers" "broker.rack" "log.dirs" "log.dir" -}}
{{- range $key, $_ := .Values.brokers.config -}}
{{- if has $key $reserved -}}{{- fail (printf "brokers.config.%s is set by the chart (listener wiring); remove it" $key) -}}{{- end -}}
{{- end -}}
{{- range $key, $_ := .Values.controllers.config -}}
{{- if has $key $reserved -}}{{- fail (printf "controllers.config.%s is set by the chart; remove it" $key) -}}{{- end -}}
{{- end -}}
{{- $w := .Values.walproxy -}}
{{- if not (has $w.wal.sse (list "none" "AES256" "aws:kms")) -}}{{- fail (printf "walproxy.wal.sse must be none, AES256 or aws:kms, not %q" $w.wal.sse) -}}{{- end -}}
{{- if and $w.wal.sseKmsKeyId (ne $w.wal.sse "aws:kms") -}}{{- fail "walproxy.wal.sseKmsKeyId needs walproxy.wal.sse=aws:kms" -}}{{- end -}}
{{- range $name, $t := $w.tls -}}
{{- if not (has $t.clientAuth (list "none" "requested" "required")) -}}{{- fail (printf "walproxy.tls.%s.clientAuth must be none, requested or required" $name) -}}{{- end -}}
{{- end -}}
{{- if and $w.sasl.mechanism (not (has $w.sasl.mechanism (list "PLAIN" "SCRAM-SHA-256" "SCRAM-SHA-512"))) -}}{{- fail "walproxy.sasl.mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512" -}}{{- end -}}
{{- if and $w.sasl.mechanism (or (not $w.sasl.username) (not $w.sasl.passwordSecret.name)) -}}{{- fail "walproxy.sasl.mechanism needs walproxy.sasl.username and walproxy.sasl.passwordSecret.name" -}}{{- end -}}
{{- if lt (int .Values.brokers.replicas) 1 -}}{{- fail "brokers.replicas must be at least 1" -}}{{- end -}}
{{- if lt (int .Values.controllers.replicas) 1 -}}{{- fail "controllers.replicas must be at least 1" -}}{{- end -}}
{{- if lt (int .Values.controllers.nodeIdBase) (int .Values.brokers.replicas) -}}
{{- fail "controllers.nodeIdBase must be at least brokers.replicas (controller and broker node ids must differ)" -}}
{{- end -}}
{{- if .Values.walproxy.controllerThroughSidecar -}}
{{- $first := add (int .Values.walproxy.ports.controllerBase) (int .Values.controllers.nodeIdBase) -}}
{{- $last := add $first (int .Values.controllers.replicas) -}}
{{- if gt $last 65536 -}}{{- fail "walproxy.ports.controllerBase + controllers.nodeIdBase + controllers.replicas must stay below 65536 (the controller path for voter V listens on controllerBase+V)" -}}{{- end -}}
{{- $egressFirst := int .Values.walproxy.ports.egressBase -}}
{{- $egressLast := add $egressFirst (int .Values.brokers.replicas) -}}
{{- if and (lt $first $egressLast) (lt $egressFirst $last) -}}{{- fail "walproxy.ports.controllerBase + the controller ids overlap the egress ports (egressBase + broker ids): move one of them" -}}{{- end -}}
{{- end -}}
{{- if gt (add (int .Values.walproxy.ports.egressBase) (int .Values.brokers.replicas)) 65536 -}}
{{- fail "walproxy.ports.egressBase + brokers.replicas must stay below 65536 (egress for broker N listens on egressBase+N)" -}}
{{- end -}}
{{- if and (or .Values.walproxy.wal.topics .Values.walproxy.wal.topicConfig) (not (include "walproxy.walEnabled" .)) -}}
{{- fail "walproxy.wal.topics / topicConfig need walproxy.wal.storeUrl or walproxy.wal.storeUrlByZone" -}}
{{- end -}}
{{- if and .Values.walproxy.wal.storeUrlByZone (not .Values.brokers.rack.enabled) -}}
{{- fail "walproxy.wal.storeUrlByZone needs brokers.rack.enabled (the zone comes from the node label)" -}}
{{- end -}}
{{- if and .Values.kafka.clusterId (not (regexMatch "^[A-Za-z0-9_-]{22}$" .Values.kafka.clusterId)) -}}
{{- fail "kafka.clusterId must be 22 characters of base64url (kafka-storage.sh random-uuid)" -}}
{{- end -}}
{{- end -}}

{{/* Topology spread: the values, or zones (DoNotSchedule) then hosts (ScheduleAnyway). */}}
{{- define "walproxy.topologySpread" -}}
{{- if .spec.topologySpreadConstraints -}}
{{ toYaml .spec.topologySpreadConstraints }}
{{- else -}}
- maxSkew: 1
  topologyKey: {{ .root.Values.brokers.rack.nodeLabel }}
  whenUnsatisfiable: DoNotSchedule
  labelSelector:
    matchLabels:
      {{- include "walproxy.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "walproxy.selectorLabels" (dict "root" .root "component" .component) | nindent 6 }}
{{- end -}}
{{- end -}}
