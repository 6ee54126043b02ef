{{/*
Names are DNS labels: at most 63 characters, no trailing dash.
*/}}
{{- define "rowbase.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's prefix: the release name alone when it already contains the chart name.
*/}}
{{- define "rowbase.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"<fullname>-<suffix>", shortening the prefix rather than the suffix so that names stay distinct.
Call with (dict "root" $ "suffix" "identity").
*/}}
{{- define "rowbase.suffixedName" -}}
{{- $prefix := include "rowbase.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $prefix .suffix }}
{{- end }}

{{- define "rowbase.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every resource. Call with (dict "root" $ "component" "identity"); component may be "".
*/}}
{{- define "rowbase.labels" -}}
helm.sh/chart: {{ include "rowbase.chart" .root }}
{{ include "rowbase.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: rowbase
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The labels a selector matches: stable across upgrades (no version), so selectors never change.
*/}}
{{- define "rowbase.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rowbase.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end }}

{{- define "rowbase.image" -}}
{{- $image := .Values.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- /* skaffold passes "<tag>@<digest>", and "<tag>@" when a local build has no digest */}}
{{- printf "%s:%s" $image.repository (toString (default .Chart.AppVersion $image.tag) | trimSuffix "@") }}
{{- end }}
{{- end }}

{{/*
What each process is, as the code has it (each service's src/config.ts and src/main.ts). Not
values: these are facts of the code, not settings.
  kind     grpc (a service) or http (the gateway)
  main     the compiled entry point, relative to the image's working directory
  needs    the secrets, stores and settings it reads (fileStorage: FILES_DIR or S3_*;
           internalJwtSecretPrevious: the services verify principals, the gateway only signs;
           webhookTargets: it connects to URLs anywhere, networkPolicy.webhookEgress)
  calls    the services whose <NAME>_GRPC_URL it gets (when they are enabled)
  requires the services it cannot start without (a required <NAME>_GRPC_URL)
  migrates whether `main migrate` applies migrations
*/}}
{{- define "rowbase.components" -}}
- name: gateway
  kind: http
  main: gateway/dist/src/main.js
  needs: [redis, nats, internalJwtSecret]
  calls: [identity, organization, catalog, records, files, webhooks]
  requires: [identity, organization, catalog, records, files]
  migrates: false
- name: identity
  kind: grpc
  main: services/identity/dist/src/main.js
  needs: [database, redis, internalJwtSecret, internalJwtSecretPrevious, jwtSigningKeys, mail, oidc]
  calls: []
  requires: []
  migrates: true
- name: organization
  kind: grpc
  main: services/organization/dist/src/main.js
  needs: [database, redis, nats, internalJwtSecret, internalJwtSecretPrevious, mail]
  calls: [identity, catalog, records, files]
  requires: [identity]
  migrates: true
- name: catalog
  kind: grpc
  main: services/catalog/dist/src/main.js
  needs: [database, redis, nats, internalJwtSecret, internalJwtSecretPrevious]
  calls: [organization, records]
  requires: [organization]
  migrates: true
- name: records
  kind: grpc
  main: services/records/dist/src/main.js
  needs: [database, redis, nats, internalJwtSecret, internalJwtSecretPrevious]
  calls: [organization, catalog, files]
  requires: [organization, catalog]
  migrates: true
- name: files
  kind: grpc
  main: services/files/dist/src/main.js
  needs: [database, redis, nats, internalJwtSecret, internalJwtSecretPrevious, fileUrlSecret, fileStorage]
  calls: [organization, catalog, records]
  requires: [organization, catalog, records]
  migrates: true
- name: webhooks
  kind: grpc
  main: services/webhooks/dist/src/main.js
  needs: [database, redis, nats, internalJwtSecret, internalJwtSecretPrevious, mail, webhookTargets]
  calls: [organization, catalog, records]
  requires: [organization, catalog, records]
  migrates: true
{{- end }}

{{/*
One component's facts by name. Call with (dict "root" $ "name" "identity"); returns YAML.
*/}}
{{- define "rowbase.component" -}}
{{- $name := .name }}
{{- range (include "rowbase.components" .root | fromYamlArray) }}
{{- if eq .name $name }}
{{- toYaml . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A process's settings: serviceDefaults with the process's own section over it, key by key and
one level deep into maps (so `gateway.autoscaling.enabled: true` keeps the default
maxReplicas). Written out by hand because sprig's merge takes false and 0 for "unset".
Call with (dict "root" $ "name" "identity"); returns YAML.
*/}}
{{- define "rowbase.settings" -}}
{{- $defaults := .root.Values.serviceDefaults }}
{{- $own := index .root.Values .name }}
{{- $out := dict }}
{{- range $key, $default := $defaults }}
{{- if not (hasKey $own $key) }}
{{- $_ := set $out $key $default }}
{{- else if and (kindIs "map" $default) (kindIs "map" (index $own $key)) }}
{{- $merged := deepCopy $default }}
{{- range $k, $v := index $own $key }}{{ $_ := set $merged $k $v }}{{ end }}
{{- $_ := set $out $key $merged }}
{{- else }}
{{- $_ := set $out $key (index $own $key) }}
{{- end }}
{{- end }}
{{- range $key, $value := $own }}
{{- if not (hasKey $out $key) }}{{ $_ := set $out $key $value }}{{ end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
How a process's Deployment replaces its pods. Call with (dict "root" $ "name" "files"). The
connection budget (rowbase.validate) counts the surge pods from here.
*/}}
{{- define "rowbase.strategy" -}}
{{- $c := include "rowbase.component" . | fromYaml }}
{{- $storage := .root.Values.files.storage }}
{{- $persistence := $storage.directory.persistence }}
{{- if and (has "fileStorage" $c.needs) (eq $storage.type "directory") $persistence.enabled (not (has "ReadWriteMany" $persistence.accessModes)) }}
# The files volume is ReadWriteOnce: a new pod on another node could not mount it.
type: Recreate
{{- else }}
# New pods start beside the old ones, and none goes before its replacement is ready.
type: RollingUpdate
rollingUpdate:
  maxUnavailable: 0
  maxSurge: 25%
{{- end }}
{{- end }}

{{/*
The gateway's Ingress annotations for ingress-nginx (other controllers ignore them), derived
from the gateway's own body limits, which bound slow and oversized bodies and answer them in
the error envelope. The proxy streams bodies to the gateway instead of spooling whole uploads
to its disk first (proxy-request-buffering off, which also leaves the pace of a body to the
gateway's rules), lets through every body the gateway takes (an upload and its multipart
framing, MULTIPART_FRAMING_BYTES in gateway/src/routes/file/multipart-upload.ts), and waits
for the gateway (to take the next bytes of a body, to answer) at least as long as the gateway
waits for a client's next chunk, never less than ingress-nginx's own 60 s; for its answer, also
as long as a schema change may take (config.schemaChangeTimeoutSeconds: the gateway waits 2 s
more than it, and the proxy 5 s more, so that the client gets the gateway's answer, 200 or 503,
and never a 504 about a change that then commits). client-body-timeout and
client-header-timeout are settings of the controller's ConfigMap, not of an Ingress (README
"Run on Kubernetes").
*/}}
{{- define "rowbase.ingressAnnotations" -}}
{{- $gateway := .Values.gateway }}
{{- $wait := max 60 (int64 $gateway.requestBodyIdleTimeoutSeconds) }}
{{- $answer := max $wait (add (int64 .Values.config.schemaChangeTimeoutSeconds) 5) }}
nginx.ingress.kubernetes.io/proxy-request-buffering: "off"
nginx.ingress.kubernetes.io/proxy-body-size: {{ add (int64 $gateway.fileUploadMaxBytes) 65536 | toString | quote }}
nginx.ingress.kubernetes.io/proxy-send-timeout: {{ $wait | toString | quote }}
nginx.ingress.kubernetes.io/proxy-read-timeout: {{ $answer | toString | quote }}
{{- end }}

{{/*
The gRPC base URL of an enabled service, as the others reach it through its Service.
*/}}
{{- define "rowbase.grpcUrl" -}}
{{- printf "http://%s:%d" (include "rowbase.suffixedName" (dict "root" .root "suffix" .name)) (int (index .root.Values .name).port) }}
{{- end }}

{{- define "rowbase.secretName" -}}
{{- include "rowbase.suffixedName" (dict "root" . "suffix" "secrets") }}
{{- end }}

{{- define "rowbase.publicBaseUrl" -}}
{{- if .Values.config.publicBaseUrl }}
{{- .Values.config.publicBaseUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- $tls := false }}
{{- range .Values.ingress.tls }}{{ if has $host .hosts }}{{ $tls = true }}{{ end }}{{ end }}
{{- printf "%s://%s" (ternary "https" "http" $tls) $host }}
{{- end }}
{{- end }}

{{/*
Plain configuration of one process: the data of its ConfigMap, and the inline env of its
migration container (the hook Job runs before the ConfigMap exists). Call with
(dict "root" $ "name" "identity"); returns a YAML map of strings.
*/}}
{{- define "rowbase.configData" -}}
{{- $root := .root }}
{{- $c := include "rowbase.component" . | fromYaml }}
{{- $own := index $root.Values .name }}
{{- $s := include "rowbase.settings" . | fromYaml }}
{{- $data := dict "LOG_LEVEL" $root.Values.config.logLevel }}
{{- /* Every process: catalog's wait for a conversion, the gateway's for catalog, and every gRPC server's longest call. */}}
{{- $_ := set $data "SCHEMA_CHANGE_TIMEOUT_SECONDS" (toString (int64 $root.Values.config.schemaChangeTimeoutSeconds)) }}
{{- $_ := set $data "METRICS_PORT" (toString (int $root.Values.metrics.port)) }}
{{- with $root.Values.tracing.otlpEndpoint }}{{ $_ := set $data "OTEL_EXPORTER_OTLP_ENDPOINT" . }}{{ end }}
{{- if eq $c.kind "http" }}
{{- $_ := set $data "PORT" (toString (int $own.port)) }}
{{- with $own.trustedProxies }}{{ $_ := set $data "TRUSTED_PROXIES" . }}{{ end }}
{{- with $own.mcpAllowedHosts }}{{ $_ := set $data "MCP_ALLOWED_HOSTS" . }}{{ end }}
{{- with $own.rateLimits }}{{ $_ := set $data "RATE_LIMITS" . }}{{ end }}
{{- with $own.corsAllowedOrigins }}{{ $_ := set $data "CORS_ALLOWED_ORIGINS" . }}{{ end }}
{{- /* The Ingress's proxy limits are derived from these two (rowbase.ingressAnnotations). */}}
{{- $_ := set $data "FILE_UPLOAD_MAX_BYTES" (toString (int64 $own.fileUploadMaxBytes)) }}
{{- $_ := set $data "REQUEST_BODY_IDLE_TIMEOUT_MS" (toString (mul (int64 $own.requestBodyIdleTimeoutSeconds) 1000)) }}
{{- else }}
{{- /* No GRPC_HOST: the service listens on every interface, IPv6 included (IPv6-only pods). */}}
{{- $_ := set $data "GRPC_PORT" (toString (int $own.port)) }}
{{- end }}
{{- if or (eq .name "gateway") (eq .name "organization") }}
{{- with include "rowbase.publicBaseUrl" $root }}{{ $_ := set $data "PUBLIC_BASE_URL" . }}{{ end }}
{{- end }}
{{- if has "database" $c.needs }}
{{- $_ := set $data "DATABASE_POOL_MAX" (toString (int $s.databasePoolMax)) }}
{{- end }}
{{- if has "mail" $c.needs }}
{{- $_ := set $data "MAIL_FROM" $root.Values.mail.from }}
{{- end }}
{{- if has "oidc" $c.needs }}
{{- $oidc := $root.Values.identity.oidc }}
{{- with $oidc.issuer }}{{ $_ := set $data "OIDC_ISSUER" . }}{{ end }}
{{- with $oidc.clientId }}{{ $_ := set $data "OIDC_CLIENT_ID" . }}{{ end }}
{{- with $oidc.redirectUri }}{{ $_ := set $data "OIDC_REDIRECT_URI" . }}{{ end }}
{{- with $oidc.allowedRedirectUris }}{{ $_ := set $data "OIDC_ALLOWED_REDIRECT_URIS" . }}{{ end }}
{{- end }}
{{- if has "fileStorage" $c.needs }}
{{- $files := $root.Values.files }}
{{- $_ := set $data "FILE_URL_TTL_SECONDS" (toString (int $files.urlTtlSeconds)) }}
{{- if eq $files.storage.type "s3" }}
{{- $_ := set $data "S3_ENDPOINT" $files.storage.s3.endpoint }}
{{- $_ := set $data "S3_BUCKET" $files.storage.s3.bucket }}
{{- $_ := set $data "S3_REGION" $files.storage.s3.region }}
{{- else }}
{{- $_ := set $data "FILES_DIR" $files.storage.directory.path }}
{{- end }}
{{- end }}
{{- if eq .name "webhooks" }}
{{- with $own.allowedTargets }}{{ $_ := set $data "WEBHOOK_ALLOWED_TARGETS" . }}{{ end }}
{{- with $own.retrySchedule }}{{ $_ := set $data "WEBHOOK_RETRY_SCHEDULE" . }}{{ end }}
{{- $_ := set $data "WEBHOOK_TIMEOUT_MS" (toString (int $own.timeoutMs)) }}
{{- end }}
{{- range $c.calls }}
{{- if (index $root.Values .).enabled }}
{{- $_ := set $data (printf "%s_GRPC_URL" (upper .)) (include "rowbase.grpcUrl" (dict "root" $root "name" .)) }}
{{- end }}
{{- end }}
{{- $env := $s.env | default dict }}
{{- range $key, $value := $env }}
{{- $_ := set $data $key (ternary (toString (int64 $value)) (toString $value) (kindIs "float64" $value)) }}
{{- end }}
{{- toYaml $data }}
{{- end }}

{{/*
Where one secret variable comes from: {name, key} of a Secret, or {} when the variable is not
set at all (optional ones). Call with (dict "root" $ "component" "identity" "var" "DATABASE_URL").
*/}}
{{- define "rowbase.secretRef" -}}
{{- $v := .root.Values }}
{{- $settings := include "rowbase.settings" (dict "root" .root "name" .component) | fromYaml }}
{{- $chart := include "rowbase.secretName" .root }}
{{- $ref := dict }}
{{- if eq .var "DATABASE_URL" }}
  {{- $db := default dict $settings.database }}
  {{- if $db.existingSecret }}
    {{- $ref = dict "name" $db.existingSecret "key" (default "DATABASE_URL" $db.existingSecretKey) }}
  {{- else if $v.database.existingSecret }}
    {{- $ref = dict "name" $v.database.existingSecret "key" $v.database.existingSecretKey }}
  {{- else }}
    {{- $ref = dict "name" $chart "key" "DATABASE_URL" }}
  {{- end }}
{{- else if eq .var "REDIS_URL" }}
  {{- $ref = ternary (dict "name" $v.redis.existingSecret "key" $v.redis.existingSecretKey) (dict "name" $chart "key" "REDIS_URL") (ne $v.redis.existingSecret "") }}
{{- else if eq .var "NATS_URL" }}
  {{- $ref = ternary (dict "name" $v.nats.existingSecret "key" $v.nats.existingSecretKey) (dict "name" $chart "key" "NATS_URL") (ne $v.nats.existingSecret "") }}
{{- else if eq .var "SMTP_URL" }}
  {{- if $v.mail.existingSecret }}
    {{- $ref = dict "name" $v.mail.existingSecret "key" $v.mail.existingSecretKey }}
  {{- else if $v.mail.smtpUrl }}
    {{- $ref = dict "name" $chart "key" "SMTP_URL" }}
  {{- end }}
{{- else if eq .var "OIDC_CLIENT_SECRET" }}
  {{- $oidc := $v.identity.oidc }}
  {{- if $oidc.existingSecret }}
    {{- $ref = dict "name" $oidc.existingSecret "key" $oidc.existingSecretKey }}
  {{- else if $oidc.clientSecret }}
    {{- $ref = dict "name" $chart "key" "OIDC_CLIENT_SECRET" }}
  {{- end }}
{{- else if eq .var "INTERNAL_JWT_SECRET_PREVIOUS" }}
  {{- /* Only while rotating: in a Secret of yours it may be absent, so the reference is optional. */}}
  {{- if $v.secrets.existingSecret }}
    {{- $ref = dict "name" $v.secrets.existingSecret "key" .var "optional" true }}
  {{- else if $v.secrets.internalJwtSecretPrevious }}
    {{- $ref = dict "name" $chart "key" .var }}
  {{- end }}
{{- else if or (eq .var "S3_ACCESS_KEY_ID") (eq .var "S3_SECRET_ACCESS_KEY") }}
  {{- $s3 := $v.files.storage.s3 }}
  {{- if ne $v.files.storage.type "s3" }}
  {{- else if $s3.existingSecret }}
    {{- $keys := $s3.existingSecretKeys }}
    {{- $ref = dict "name" $s3.existingSecret "key" (ternary $keys.accessKeyId $keys.secretAccessKey (eq .var "S3_ACCESS_KEY_ID")) }}
  {{- else }}
    {{- $ref = dict "name" $chart "key" .var }}
  {{- end }}
{{- else }}
  {{- $ref = dict "name" (default $chart $v.secrets.existingSecret) "key" .var }}
{{- end }}
{{- toYaml $ref }}
{{- end }}

{{/*
The secret env entries of one process (secretKeyRef only: no secret value in a pod spec).
Call with (dict "root" $ "name" "identity").
*/}}
{{- define "rowbase.secretEnv" -}}
{{- $c := include "rowbase.component" . | fromYaml }}
{{- $vars := list }}
{{- range $c.needs }}
{{- $vars = concat $vars (get (dict
    "database" (list "DATABASE_URL")
    "redis" (list "REDIS_URL")
    "nats" (list "NATS_URL")
    "internalJwtSecret" (list "INTERNAL_JWT_SECRET")
    "internalJwtSecretPrevious" (list "INTERNAL_JWT_SECRET_PREVIOUS")
    "jwtSigningKeys" (list "JWT_SIGNING_KEYS")
    "fileUrlSecret" (list "FILE_URL_SECRET")
    "fileStorage" (list "S3_ACCESS_KEY_ID" "S3_SECRET_ACCESS_KEY")
    "mail" (list "SMTP_URL")
    "oidc" (list "OIDC_CLIENT_SECRET")
    "webhookTargets" (list)) .) }}
{{- end }}
{{- range $vars }}
{{- $ref := include "rowbase.secretRef" (dict "root" $.root "component" $.name "var" .) | fromYaml }}
{{- if $ref.name }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
      {{- if $ref.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Stops rendering with one message listing every setting a working installation lacks.
*/}}
{{- define "rowbase.validate" -}}
{{- $v := .Values }}
{{- $problems := list }}
{{- if not (or $v.database.url $v.database.existingSecret) }}
{{- $problems = append $problems "database.url or database.existingSecret (PostgreSQL)" }}
{{- end }}
{{- if not (or $v.redis.url $v.redis.existingSecret) }}
{{- $problems = append $problems "redis.url or redis.existingSecret" }}
{{- end }}
{{- if not (or $v.nats.url $v.nats.existingSecret) }}
{{- $problems = append $problems "nats.url or nats.existingSecret (NATS with JetStream)" }}
{{- end }}
{{- range (include "rowbase.components" . | fromYamlArray) }}
{{- $name := .name }}
{{- if (index $v $name).enabled }}
{{- range .requires }}
{{- if not (index $v .).enabled }}
{{- $problems = append $problems (printf "%s.enabled: %s needs it" . $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /*
Variables the chart sets from a value of its own and builds on (the connection budget below,
the Ingress's proxy limits):
set through env (merged over the ConfigMap) or extraEnv (which wins over it), they would
change the pods unseen by the chart's checks.
*/}}
{{- range (include "rowbase.components" . | fromYamlArray) }}
{{- $name := .name }}
{{- if (index $v $name).enabled }}
{{- $fromValues := dict "SCHEMA_CHANGE_TIMEOUT_SECONDS" "config.schemaChangeTimeoutSeconds" }}
{{- if has "database" .needs }}{{ $_ := set $fromValues "DATABASE_POOL_MAX" (printf "%s.databasePoolMax" $name) }}{{ end }}
{{- if eq .kind "http" }}
{{- $_ := set $fromValues "FILE_UPLOAD_MAX_BYTES" "gateway.fileUploadMaxBytes" }}
{{- $_ := set $fromValues "REQUEST_BODY_IDLE_TIMEOUT_MS" "gateway.requestBodyIdleTimeoutSeconds" }}
{{- end }}
{{- $s := include "rowbase.settings" (dict "root" $ "name" $name) | fromYaml }}
{{- $names := keys ($s.env | default dict) }}
{{- range $s.extraEnv }}{{ $names = append $names .name }}{{ end }}
{{- range $var := $names | uniq | sortAlpha }}
{{- with get $fromValues $var }}
{{- $problems = append $problems (printf "%s: %s in env or extraEnv (its own or serviceDefaults') would override %s, which the chart sets it from and counts on; set %s instead" $name $var . .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /*
Every pod of every service may hold its whole pool at once: the replicas (autoscaling: the most
replicas), and during a rolling update the surge pods beside them (maxSurge of the replicas,
rounded up as Kubernetes does). The migrations Job is not added: it runs before the rollout,
beside the old pods alone, one step at a time over one connection (kit's migrate applies a
service's migrations in one transaction), fewer than any rollout's surge pods hold after it.
*/}}
{{- $connections := 0 }}
{{- $surgeConnections := 0 }}
{{- $pools := list }}
{{- range (include "rowbase.components" . | fromYamlArray) }}
{{- if and (has "database" .needs) (index $v .name).enabled }}
{{- $s := include "rowbase.settings" (dict "root" $ "name" .name) | fromYaml }}
{{- $pool := int $s.databasePoolMax }}
{{- $replicas := int (ternary $s.autoscaling.maxReplicas $s.replicaCount $s.autoscaling.enabled) }}
{{- $surge := 0 }}
{{- with (include "rowbase.strategy" (dict "root" $ "name" .name) | fromYaml).rollingUpdate }}
{{- $surge = div (add (mul $replicas (trimSuffix "%" .maxSurge | int)) 99) 100 }}
{{- end }}
{{- $connections = add $connections (mul $replicas $pool) }}
{{- $surgeConnections = add $surgeConnections (mul $surge $pool) }}
{{- $pools = append $pools (ternary (printf "%s (%d+%d) x %d" .name $replicas (int $surge) $pool) (printf "%s %d x %d" .name $replicas $pool) (gt (int $surge) 0)) }}
{{- end }}
{{- end }}
{{- $available := sub $v.postgresql.maxConnections $v.postgresql.reservedConnections }}
{{- $peak := add $connections $surgeConnections }}
{{- if gt (int $peak) (int $available) }}
{{- $problems = append $problems (printf "postgresql.maxConnections: the services' pools may open %d PostgreSQL connections during a rolling update, %d of the running pods and %d of the surge pods started beside them ((replicas+surge) x databasePoolMax: %s), more than the %d of postgresql.maxConnections (%d) minus postgresql.reservedConnections (%d); lower <service>.databasePoolMax or the replicas (autoscaling.maxReplicas), or raise max_connections on the server and set postgresql.maxConnections to it" (int $peak) (int $connections) (int $surgeConnections) (join ", " $pools) (int $available) (int $v.postgresql.maxConnections) (int $v.postgresql.reservedConnections)) }}
{{- end }}
{{- if and $v.ingress.enabled $v.gateway.enabled }}
{{- range $key, $_ := include "rowbase.ingressAnnotations" . | fromYaml }}
{{- if hasKey $v.ingress.annotations $key }}
{{- $problems = append $problems (printf "ingress.annotations: the chart sets %s to fit the gateway's body limits and its wait for a schema change; change gateway.fileUploadMaxBytes, gateway.requestBodyIdleTimeoutSeconds or config.schemaChangeTimeoutSeconds instead (README \"Run on Kubernetes\")" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Behind an Ingress every request's peer is the controller: the per-IP limits see one client. */}}
{{- if and $v.ingress.enabled $v.gateway.enabled (not $v.gateway.trustedProxies) (ne (lower $v.gateway.rateLimits) "off") }}
{{- $problems = append $problems "gateway.trustedProxies: the addresses of your ingress controller's pods (e.g. the pod CIDR), so that the gateway believes their X-Forwarded-For; otherwise every client shares the per-IP rate limits of the controller (ten logins a minute for everybody)" }}
{{- end }}
{{- if $v.files.enabled }}
{{- $storage := $v.files.storage }}
{{- if eq $storage.type "s3" }}
{{- $s3 := $storage.s3 }}
{{- if not $s3.endpoint }}
{{- $problems = append $problems "files.storage.s3.endpoint: the S3 API's URL (https://s3.<region>.amazonaws.com, or your MinIO/R2/... endpoint)" }}
{{- end }}
{{- if not $s3.bucket }}
{{- $problems = append $problems "files.storage.s3.bucket" }}
{{- end }}
{{- if not (or $s3.existingSecret (and $s3.accessKeyId $s3.secretAccessKey)) }}
{{- $problems = append $problems "files.storage.s3.accessKeyId and files.storage.s3.secretAccessKey, or files.storage.s3.existingSecret" }}
{{- end }}
{{- else }}
{{- $files := include "rowbase.settings" (dict "root" . "name" "files") | fromYaml }}
{{- $several := or (gt (int $files.replicaCount) 1) (and $files.autoscaling.enabled (gt (int $files.autoscaling.maxReplicas) 1)) }}
{{- $persistence := $storage.directory.persistence }}
{{- if and $several (not (and $persistence.enabled (has "ReadWriteMany" $persistence.accessModes))) }}
{{- $problems = append $problems "files.storage: several files replicas share one directory only on a ReadWriteMany volume (files.storage.directory.persistence.enabled with accessModes [ReadWriteMany], from a storage class that offers it: NFS, EFS, Azure Files, CephFS, ...); otherwise run one replica (files.replicaCount: 1, no autoscaling) or use files.storage.type s3" }}
{{- end }}
{{- end }}
{{- end }}
{{- if $v.identity.enabled }}
{{- $oidc := $v.identity.oidc }}
{{- $oidcSet := list }}
{{- $oidcMissing := list }}
{{- range $key, $value := dict "identity.oidc.issuer" $oidc.issuer "identity.oidc.clientId" $oidc.clientId "identity.oidc.clientSecret (or identity.oidc.existingSecret)" (or $oidc.clientSecret $oidc.existingSecret) "identity.oidc.redirectUri" $oidc.redirectUri }}
{{- if $value }}{{ $oidcSet = append $oidcSet $key }}{{ else }}{{ $oidcMissing = append $oidcMissing $key }}{{ end }}
{{- end }}
{{- if and $oidcSet $oidcMissing }}
{{- $problems = append $problems (printf "%s: sign-in with an OpenID Connect provider needs all four of issuer, clientId, clientSecret and redirectUri" (join ", " $oidcMissing)) }}
{{- else if and $oidc.allowedRedirectUris (not $oidcSet) }}
{{- $problems = append $problems "identity.oidc.allowedRedirectUris needs identity.oidc.issuer, clientId, clientSecret and redirectUri" }}
{{- end }}
{{- end }}
{{- with $v.secrets.jwtSigningKeys }}
{{- $keys := fromJsonArray . }}
{{- $valid := gt (len $keys) 0 }}
{{- range $keys }}
{{- if not (and (kindIs "map" .) (eq (get . "kty") "OKP") (eq (get . "crv") "Ed25519") (get . "kid") (get . "x") (get . "d")) }}
{{- $valid = false }}
{{- end }}
{{- end }}
{{- if not $valid }}
{{- $problems = append $problems "secrets.jwtSigningKeys: a JSON array of Ed25519 private JWKs, each with kty OKP, crv Ed25519, kid, x and d" }}
{{- end }}
{{- end }}
{{- with $v.secrets.internalJwtSecret }}
{{- if lt (len .) 32 }}
{{- $problems = append $problems "secrets.internalJwtSecret: at least 32 characters" }}
{{- end }}
{{- end }}
{{- with $v.secrets.internalJwtSecretPrevious }}
{{- if lt (len .) 32 }}
{{- $problems = append $problems "secrets.internalJwtSecretPrevious: at least 32 characters" }}
{{- end }}
{{- if $v.secrets.existingSecret }}
{{- $problems = append $problems "secrets.internalJwtSecretPrevious: with secrets.existingSecret, put INTERNAL_JWT_SECRET_PREVIOUS in that Secret instead" }}
{{- end }}
{{- end }}
{{- if $problems }}
{{- fail (printf "\n\nRowbase needs these values:\n  - %s\n\nSee the README section \"Run on Kubernetes\"." (join "\n  - " $problems)) }}
{{- end }}
{{- end }}

{{/*
A fresh JWT_SIGNING_KEYS value: one Ed25519 private JWK. Sprig generates the key as PKCS#8 PEM,
whose DER ends with the 32-byte seed (the JWK's `d`). Sprig cannot derive the public key (`x`)
directly, so a throwaway self-signed certificate is made with the key and `x` is read from its
SubjectPublicKeyInfo, which follows a fixed 12-byte prefix (RFC 8410). The kid is a truncated
SHA-256 of the public JWK's canonical form (as in RFC 7638, hex instead of base64url).
*/}}
{{- define "rowbase.newSigningKeys" -}}
{{- $pem := genPrivateKey "ed25519" }}
{{- $cert := genSelfSignedCertWithKey "rowbase-jwt-key" nil nil 1 $pem }}
{{- $certDer := regexReplaceAll "-----[A-Z ]+-----|\\s" $cert.Cert "" | b64dec }}
{{- $spki := splitList "\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00" $certDer }}
{{- if ne (len $spki) 2 }}{{ fail "could not read the generated Ed25519 public key" }}{{ end }}
{{- $x := index $spki 1 | substr 0 32 | b64enc | replace "+" "-" | replace "/" "_" | trimAll "=" }}
{{- $d := regexReplaceAll "-----[A-Z ]+-----|\\s" $pem "" | b64dec | substr 16 48 | b64enc | replace "+" "-" | replace "/" "_" | trimAll "=" }}
{{- $kid := printf "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}" $x | sha256sum | trunc 16 }}
{{- list (dict "kty" "OKP" "crv" "Ed25519" "kid" $kid "x" $x "d" $d) | toJson }}
{{- end }}

{{/*
The egress rules to a peer reached by URL (PostgreSQL, Redis, NATS, SMTP, the OIDC provider, S3,
the OTLP collector): the rules given, else the URL's port, any address. A URL without a port
takes its scheme's usual one (`schemes`, e.g. smtps: 465); with no URL in values (it is in a
Secret) or a scheme not listed, `ports`. Call with (dict "rules" .. "url" .. "schemes" (dict ..)
"ports" (list ..)).
*/}}
{{- define "rowbase.urlEgress" -}}
{{- if .rules }}
{{- toYaml .rules }}
{{- else }}
{{- $ports := .ports }}
{{- with .url }}
{{- $url := urlParse . }}
{{- $port := regexFind "[0-9]+$" (regexFind ":[0-9]+$" $url.host) | default (get ($.schemes | default dict) $url.scheme) }}
{{- if $port }}{{ $ports = list $port }}{{ end }}
{{- end }}
- ports:
    {{- range $ports }}
    - port: {{ int . }}
      protocol: TCP
    {{- end }}
{{- end }}
{{- end }}
