{{/* The walproxy sidecar container of a broker pod (a native sidecar or a plain container). */}}
{{- define "walproxy.sidecarContainer" -}}
{{- $w := .Values.walproxy -}}
name: walproxy
image: {{ include "walproxy.image" . }}
imagePullPolicy: {{ $w.image.pullPolicy }}
{{- if $w.nativeSidecar }}
# A native sidecar: started (startupProbe passed) before Kafka, stopped after it.
restartPolicy: Always
{{- end }}
# The wrapper adds --broker-id (the pod's ordinal) and --wal-store-url (this zone's store).
command: ["/bin/sh", "/etc/walproxy/start-walproxy.sh"]
args:
  - --client-listen=0.0.0.0:{{ $w.ports.client }}
  - --client-upstream=127.0.0.1:{{ .Values.brokers.ports.client }}
  - --replication-listen=0.0.0.0:{{ $w.ports.replication }}
  - --replication-upstream=127.0.0.1:{{ .Values.brokers.ports.replication }}
  - --egress-listen-base={{ $w.ports.egressBase }}
  - --egress-broker-ids={{ include "walproxy.brokerIds" . }}
  - --peer-address-template={{ include "walproxy.brokerName" . }}-{id}.{{ include "walproxy.brokerHeadless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ $w.ports.replication }}
  - --admin-listen=0.0.0.0:{{ $w.ports.admin }}
  {{- if $w.controllerThroughSidecar }}
  {{- /* The broker's controller path: voter V on 127.0.0.1:controllerBase+V, forwarded to V. */}}
  - --controller-listen-base={{ $w.ports.controllerBase }}
  {{- range $i := until (int .Values.controllers.replicas) }}
  - --controller-address={{ add (int $.Values.controllers.nodeIdBase) $i }}={{ include "walproxy.controllerHost" (dict "root" $ "ordinal" $i) }}:{{ $.Values.controllers.port }}
  {{- end }}
  {{- end }}
  - --drain-timeout-ms={{ $w.drainTimeoutMs }}
  - --log-level={{ $w.logLevel }}
  {{- if include "walproxy.walEnabled" . }}
  {{- range $w.wal.topics }}
  - --wal-topic={{ . }}
  {{- end }}
  {{- range $w.wal.topicConfig }}
  - --topic-config={{ . }}
  {{- end }}
  {{- if $w.wal.s3Region }}
  - --s3-region={{ $w.wal.s3Region }}
  {{- end }}
  {{- if and $w.wal.sse (ne $w.wal.sse "none") }}
  - --s3-sse={{ $w.wal.sse }}
  {{- end }}
  {{- if $w.wal.sseKmsKeyId }}
  - --s3-sse-kms-key-id={{ $w.wal.sseKmsKeyId }}
  {{- end }}
  {{- /* A follower reads a reference from the leader's zone's store: allow every zone's. */}}
  {{- range $zone, $url := $w.wal.storeUrlByZone }}
  - --wal-read-store-url={{ $url }}
  {{- end }}
  {{- /* The sidecar's own Kafka client (metadata topic, topic-id lookups). */}}
  {{- if $w.sasl.mechanism }}
  - --metadata-sasl-mechanism={{ $w.sasl.mechanism }}
  - --metadata-sasl-username={{ $w.sasl.username }}
  - --metadata-sasl-password-file=/var/run/secrets/walproxy/sasl/password
  {{- end }}
  {{- if $w.tls.client.secretName }}
  {{- /* Brokers advertise the client ingresses, so that client dials them over TLS, by name. */}}
  - --metadata-bootstrap=$(POD_NAME).{{ include "walproxy.brokerHeadless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ $w.ports.client }}
  - --metadata-tls-ca=/var/run/secrets/walproxy/client-tls/ca.crt
  {{- if ne $w.tls.client.clientAuth "none" }}
  - --metadata-tls-cert=/var/run/secrets/walproxy/client-tls/tls.crt
  - --metadata-tls-key=/var/run/secrets/walproxy/client-tls/tls.key
  {{- end }}
  {{- end }}
  {{- end }}
  {{- if $w.tls.client.secretName }}
  - --client-tls-cert=/var/run/secrets/walproxy/client-tls/tls.crt
  - --client-tls-key=/var/run/secrets/walproxy/client-tls/tls.key
  - --client-tls-client-auth={{ $w.tls.client.clientAuth }}
  {{- if ne $w.tls.client.clientAuth "none" }}
  - --client-tls-ca=/var/run/secrets/walproxy/client-tls/ca.crt
  {{- end }}
  {{- end }}
  {{- if $w.tls.replication.secretName }}
  {{- /* Mutual TLS both ways: the replication ingress checks peers, the egress presents the same certificate. */}}
  - --replication-tls-cert=/var/run/secrets/walproxy/replication-tls/tls.crt
  - --replication-tls-key=/var/run/secrets/walproxy/replication-tls/tls.key
  - --replication-tls-ca=/var/run/secrets/walproxy/replication-tls/ca.crt
  - --replication-tls-client-auth={{ $w.tls.replication.clientAuth }}
  - --peer-tls-verify-hostname={{ $w.tls.replication.verifyHostname }}
  {{- end }}
  {{- range $w.extraArgs }}
  - {{ . | quote }}
  {{- end }}
env:
  - name: POD_NAME
    valueFrom: { fieldRef: { fieldPath: metadata.name } }
  {{- with include "walproxy.memoryBytes" $w.resources.limits.memory }}
  # V8's heap gets its share of the container's limit, 44 % (proxy/src/memory-budget.ts;
  # docs/deploy.md, "Memory"); walproxy reads the limit itself from its cgroup and sizes every
  # cache and queue from it.
  - name: NODE_OPTIONS
    value: "--max-old-space-size={{ div (mul (int64 .) 44) 104857600 }}"
  # And V8's old generation starts at half that share, 22 %: with V8's own start a sidecar's small
  # heap is marked about once a second under load, a fifth of its CPU (memory-budget.ts). Node
  # takes this one on its command line only (start-walproxy.sh), not in NODE_OPTIONS.
  - name: NODE_HEAP_FLAGS
    value: "--initial-old-space-size={{ div (mul (int64 .) 22) 104857600 }}"
  {{- end }}
  {{- if $w.otlpEndpoint }}
  - name: OTEL_EXPORTER_OTLP_ENDPOINT
    value: {{ $w.otlpEndpoint | quote }}
  - name: OTEL_SERVICE_NAME
    value: walproxy
  {{- with $w.tracing.sampler }}
  # Read by the OpenTelemetry SDK's tracer provider (walproxy passes it no sampler of its own).
  - name: OTEL_TRACES_SAMPLER
    value: {{ . | quote }}
  {{- end }}
  {{- with $w.tracing.samplerArg }}
  - name: OTEL_TRACES_SAMPLER_ARG
    value: {{ . | quote }}
  {{- end }}
  {{- end }}
  {{- with $w.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  - { name: client, containerPort: {{ $w.ports.client }}, protocol: TCP }
  - { name: replication, containerPort: {{ $w.ports.replication }}, protocol: TCP }
  - { name: admin, containerPort: {{ $w.ports.admin }}, protocol: TCP }
# Started once every listener is bound (the store is probed in the background, never awaited).
startupProbe:
  httpGet: { path: /healthz, port: admin }
  {{- toYaml $w.probes.startup | nindent 2 }}
livenessProbe:
  httpGet: { path: /healthz, port: admin }
  {{- toYaml $w.probes.liveness | nindent 2 }}
# Ready while the broker accepts connections and the sidecar is not draining; the WAL store's
# state is in the body, never a reason to be unready (the sidecar then serves inline).
readinessProbe:
  httpGet: { path: /readyz, port: admin }
  {{- toYaml $w.probes.readiness | nindent 2 }}
resources:
  {{- toYaml $w.resources | nindent 2 }}
securityContext:
  {{- toYaml $w.securityContext | nindent 2 }}
volumeMounts:
  - { name: config, mountPath: /etc/walproxy, readOnly: true }
  - { name: pod, mountPath: /var/run/walproxy, readOnly: true }
  {{- if $w.tls.client.secretName }}
  - { name: walproxy-client-tls, mountPath: /var/run/secrets/walproxy/client-tls, readOnly: true }
  {{- end }}
  {{- if $w.tls.replication.secretName }}
  - { name: walproxy-replication-tls, mountPath: /var/run/secrets/walproxy/replication-tls, readOnly: true }
  {{- end }}
  {{- if $w.sasl.mechanism }}
  - { name: walproxy-sasl, mountPath: /var/run/secrets/walproxy/sasl, readOnly: true }
  {{- end }}
{{- end }}
