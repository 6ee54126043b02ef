{{/*
The one template every Rowbase process is rendered from: its ConfigMap, ServiceAccount,
Deployment and Service, and optionally its HorizontalPodAutoscaler and PodDisruptionBudget.
Call with (dict "root" $ "name" "identity"); renders nothing when the process is disabled.
*/}}
{{- define "rowbase.process" -}}
{{- $root := .root }}
{{- $name := .name }}
{{- if (index $root.Values $name).enabled }}
{{- include "rowbase.validate" $root }}
{{- $c := include "rowbase.component" . | fromYaml }}
{{- $s := include "rowbase.settings" . | fromYaml }}
{{- $fullName := include "rowbase.suffixedName" (dict "root" $root "suffix" $name) }}
{{- $ctx := dict "root" $root "component" $name }}
{{- $grpc := eq $c.kind "grpc" }}
{{- $portName := ternary "grpc" "http" $grpc }}
{{- $port := int $s.port }}
{{- $metricsPort := int $root.Values.metrics.port }}
{{- $serviceType := ternary "ClusterIP" (dig "service" "type" "ClusterIP" $s) $grpc }}
{{- /* A gateway Service reachable from outside must not carry /metrics: it gets its own. */}}
{{- $separateMetricsService := ne $serviceType "ClusterIP" }}
{{- $configData := include "rowbase.configData" . }}
{{- $serviceAccount := ternary $fullName (default "default" $s.serviceAccount.name) $s.serviceAccount.create }}
{{- /* The files directory (files.storage.type directory): a PersistentVolumeClaim or an emptyDir. */}}
{{- $filesDir := dict }}
{{- if and (has "fileStorage" $c.needs) (eq $root.Values.files.storage.type "directory") }}
{{- $filesDir = $root.Values.files.storage.directory }}
{{- end }}
{{- /* With fsGroup, the kubelet would chown every file of the volume on each pod start. */}}
{{- $podSecurityContext := deepCopy $s.podSecurityContext }}
{{- if and $filesDir $podSecurityContext.fsGroup (not (hasKey $podSecurityContext "fsGroupChangePolicy")) }}
{{- $_ := set $podSecurityContext "fsGroupChangePolicy" "OnRootMismatch" }}
{{- end }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
data:
  {{- $configData | nindent 2 }}
{{- if $s.serviceAccount.create }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
  {{- with $s.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
# Rowbase never talks to the Kubernetes API.
automountServiceAccountToken: false
{{- end }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
spec:
  {{- if not $s.autoscaling.enabled }}
  replicas: {{ int $s.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "rowbase.selectorLabels" $ctx | nindent 6 }}
  strategy:
    {{- include "rowbase.strategy" . | trim | nindent 4 }}
  template:
    metadata:
      labels:
        {{- include "rowbase.labels" $ctx | nindent 8 }}
        {{- with $s.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ $configData | sha256sum }}
        checksum/secrets: {{ list $root.Values.secrets $root.Values.database $root.Values.redis $root.Values.nats $root.Values.mail $root.Values.identity.oidc $s.database (ternary $root.Values.files.storage.s3 dict (has "fileStorage" $c.needs)) | toJson | sha256sum }}
        {{- with $s.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $serviceAccount }}
      automountServiceAccountToken: false
      # Service links would add a <SERVICE>_PORT variable per Service in the namespace.
      enableServiceLinks: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $podSecurityContext | nindent 8 }}
      # preStop sleep, then SIGTERM: the process stops taking calls and drains (main.ts).
      terminationGracePeriodSeconds: {{ int $s.terminationGracePeriodSeconds }}
      containers:
        - name: {{ $name }}
          image: {{ include "rowbase.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: [{{ $c.main | quote }}]
          ports:
            - name: {{ $portName }}
              containerPort: {{ $port }}
              protocol: TCP
            # GET /metrics for Prometheus (METRICS_PORT), plain HTTP/1.1.
            - name: metrics
              containerPort: {{ $metricsPort }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ $fullName }}
          {{- $secretEnv := include "rowbase.secretEnv" . }}
          {{- if or $secretEnv $s.extraEnv }}
          env:
            {{- with $secretEnv }}
            {{- . | trim | nindent 12 }}
            {{- end }}
            {{- with $s.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          {{- range $probe := list "startup" "readiness" "liveness" }}
          {{ $probe }}Probe:
            {{- if $grpc }}
            # Kubernetes' native gRPC probe: grpc.health.v1.Health/Check for the server ("").
            grpc:
              port: {{ $port }}
            {{- else }}
            # /health, not /health/ready: a gateway whose one service is down still serves
            # every other route, so it stays in its Service's endpoints.
            httpGet:
              path: /health
              port: http
            {{- end }}
            {{- toYaml (index $s.probes $probe) | nindent 12 }}
          {{- end }}
          {{- if gt (int $s.preStopSleepSeconds) 0 }}
          lifecycle:
            preStop:
              exec:
                command: ["sleep", {{ int $s.preStopSleepSeconds | toString | quote }}]
          {{- end }}
          resources:
            {{- toYaml $s.resources | nindent 12 }}
          securityContext:
            {{- toYaml $s.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- if $filesDir }}
            - name: files
              mountPath: {{ $filesDir.path }}
            {{- end }}
      volumes:
        # The root filesystem is read-only; /tmp is the one writable place (and the files directory).
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- if $filesDir }}
        - name: files
          {{- if $filesDir.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default $fullName $filesDir.persistence.existingClaim }}
          {{- else }}
          # Development only: the files go with the pod.
          emptyDir:
            {{- with $filesDir.emptyDirSizeLimit }}
            sizeLimit: {{ . }}
            {{- else }} {}
            {{- end }}
          {{- end }}
        {{- end }}
      {{- with $s.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $s.topologySpreadConstraints }}
      {{- $constraints := list }}
      {{- range . }}
      {{- $constraint := deepCopy . }}
      {{- if not (hasKey $constraint "labelSelector") }}
      {{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "rowbase.selectorLabels" $ctx | fromYaml)) }}
      {{- end }}
      {{- $constraints = append $constraints $constraint }}
      {{- end }}
      topologySpreadConstraints:
        {{- toYaml $constraints | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
spec:
  type: {{ $serviceType }}
  {{- if ne $serviceType "ClusterIP" }}
  # The per-IP rate limits key on the peer: with Cluster, kube-proxy's SNAT makes it a node.
  externalTrafficPolicy: {{ dig "service" "externalTrafficPolicy" "Local" $s }}
  {{- end }}
  selector:
    {{- include "rowbase.selectorLabels" $ctx | nindent 4 }}
  ports:
    - name: {{ $portName }}
      port: {{ ternary $port (int (dig "service" "port" $port $s)) $grpc }}
      targetPort: {{ $portName }}
      protocol: TCP
      appProtocol: {{ ternary "kubernetes.io/h2c" "http" $grpc }}
    {{- if not $separateMetricsService }}
    - name: metrics
      port: {{ $metricsPort }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
    {{- end }}
{{- if $separateMetricsService }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "rowbase.suffixedName" (dict "root" $root "suffix" (printf "%s-metrics" $name)) }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "rowbase.selectorLabels" $ctx | nindent 4 }}
  ports:
    - name: metrics
      port: {{ $metricsPort }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
{{- end }}
{{- if $s.autoscaling.enabled }}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ $fullName }}
  minReplicas: {{ int $s.autoscaling.minReplicas }}
  maxReplicas: {{ int $s.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ int $s.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}
{{- if $s.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $fullName }}
  labels:
    {{- include "rowbase.labels" $ctx | nindent 4 }}
spec:
  maxUnavailable: {{ int $s.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "rowbase.selectorLabels" $ctx | nindent 6 }}
{{- end }}
{{- end }}
{{- end }}
