{{/*
Names, labels and the webhook's TLS material, shared by every template.
*/}}

{{- define "yuniplace.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of namespaced objects: the release name, with the chart name unless it already contains it.
*/}}
{{- define "yuniplace.fullname" -}}
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
Name of cluster-scoped objects (ClusterRole, webhook configurations): qualified by the release namespace,
so releases of the same name in different namespaces (one per watched namespace) do not collide.
*/}}
{{- define "yuniplace.clusterName" -}}
{{- include "yuniplace.hashedName" (printf "%s-%s" (include "yuniplace.fullname" .) .Release.Namespace) }}
{{- end }}

{{/*
Name of the read-only ClusterRole (and binding) that admission needs.
*/}}
{{- define "yuniplace.admissionClusterName" -}}
{{- include "yuniplace.hashedName" (printf "%s-%s-admission" (include "yuniplace.fullname" .) .Release.Namespace) }}
{{- end }}

{{/*
Name of the read-only ClusterRole (and binding) that watches CRDs: optional APIs come and gone.
*/}}
{{- define "yuniplace.apisClusterName" -}}
{{- include "yuniplace.hashedName" (printf "%s-%s-apis" (include "yuniplace.fullname" .) .Release.Namespace) }}
{{- end }}

{{/*
A name of at most 63 characters: shortened with a hash of the whole, so long names sharing a prefix stay apart.
*/}}
{{- define "yuniplace.hashedName" -}}
{{- if gt (len .) 63 }}
{{- printf "%s-%s" (. | trunc 54 | trimSuffix "-") (. | sha256sum | trunc 8) }}
{{- else }}
{{- . }}
{{- end }}
{{- end }}

{{- define "yuniplace.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "yuniplace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "yuniplace.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "yuniplace.labels" -}}
helm.sh/chart: {{ include "yuniplace.chart" . }}
{{ include "yuniplace.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: yuniplace
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "yuniplace.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "yuniplace.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "yuniplace.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "yuniplace.leaseName" -}}
{{- default (include "yuniplace.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "yuniplace.restartsConfigMapName" -}}
{{- printf "%s-restarts" (include "yuniplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "yuniplace.webhookServiceName" -}}
{{- printf "%s-webhook" (include "yuniplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "yuniplace.metricsServiceName" -}}
{{- printf "%s-metrics" (include "yuniplace.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "yuniplace.tlsSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "yuniplace.fullname" .) | trunc 63 | trimSuffix "-") .Values.webhook.tls.existingSecret }}
{{- end }}

{{/*
"true" when the replicas serve the webhook themselves: it is enabled and not pointed at an outside URL.
*/}}
{{- define "yuniplace.webhookInCluster" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.url) }}true{{ end }}
{{- end }}

{{/*
How the webhook's certificate is provided: "existing" (webhook.tls.existingSecret), "certManager", or
"generated" by this chart.
*/}}
{{- define "yuniplace.tlsMode" -}}
{{- if and .Values.webhook.tls.existingSecret .Values.webhook.tls.certManager.enabled }}
{{- fail "set either webhook.tls.existingSecret or webhook.tls.certManager.enabled, not both" }}
{{- else if .Values.webhook.tls.existingSecret }}existing
{{- else if .Values.webhook.tls.certManager.enabled }}certManager
{{- else }}generated
{{- end }}
{{- end }}

{{/*
DNS names the serving certificate must carry: the webhook Service's, plus webhook.tls.extraDNSNames.
*/}}
{{- define "yuniplace.tlsDNSNames" -}}
{{- $svc := include "yuniplace.webhookServiceName" . }}
{{- $ns := .Release.Namespace }}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) }}
{{- concat $names .Values.webhook.tls.extraDNSNames | uniq | toJson }}
{{- end }}

{{/*
The generated CA and serving certificate, as YAML {caCert, cert, key, notAfter, subjects}.

genCA is random, yet the Secret, the webhooks' caBundle and the Deployment's checksum must agree: the
result is computed once per render and kept in .Values (shared by every template of the chart). On
`helm upgrade` the Secret already in the cluster is reused (lookup), so the certificate stays stable,
unless its names or validityDays changed or less than a third of its validity is left. `helm template`
cannot look the Secret up and always generates a fresh pair.
*/}}
{{- define "yuniplace.generatedTLS" -}}
{{- if not (hasKey .Values "yuniplaceGeneratedTLS") }}
{{- $days := int .Values.webhook.tls.validityDays }}
{{- $dnsNames := include "yuniplace.tlsDNSNames" . | fromJsonArray }}
{{- $ips := .Values.webhook.tls.extraIPs | default list }}
{{- $subjects := dict "dnsNames" $dnsNames "ips" $ips "days" $days | toJson | sha256sum }}
{{- $renewAfter := add (now).Unix (div (mul $days 86400) 3) }}
{{- $tls := dict }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "yuniplace.tlsSecretName" .) }}
{{- if and $existing $existing.data $existing.metadata.annotations }}
{{- $data := $existing.data }}
{{- $notes := $existing.metadata.annotations }}
{{- $notAfter := toDate "2006-01-02T15:04:05Z07:00" (index $notes "yuniplace.io/tls-not-after" | default "") }}
{{- if and (index $data "tls.crt") (index $data "tls.key") (index $data "ca.crt")
           (eq (index $notes "yuniplace.io/tls-subjects" | default "") $subjects)
           (gt $notAfter.Unix $renewAfter) }}
{{- $tls = dict "caCert" (index $data "ca.crt" | b64dec) "cert" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) "notAfter" (index $notes "yuniplace.io/tls-not-after") }}
{{- end }}
{{- end }}
{{- if not $tls }}
{{- $ca := genCA (printf "%s-webhook-ca" (include "yuniplace.fullname" .)) $days }}
{{- $cert := genSignedCert (include "yuniplace.webhookServiceName" .) $ips $dnsNames $days $ca }}
{{- $notAfter := dateInZone "2006-01-02T15:04:05Z07:00" (now | dateModify (printf "+%dh" (mul $days 24))) "UTC" }}
{{- $tls = dict "caCert" $ca.Cert "cert" $cert.Cert "key" $cert.Key "notAfter" $notAfter }}
{{- end }}
{{- $_ := set $tls "subjects" $subjects }}
{{- $_ := set .Values "yuniplaceGeneratedTLS" $tls }}
{{- end }}
{{- index .Values "yuniplaceGeneratedTLS" | toYaml }}
{{- end }}

{{/*
The webhooks' caBundle (base64 PEM), or nothing when cert-manager injects it.
*/}}
{{- define "yuniplace.caBundle" -}}
{{- $mode := include "yuniplace.tlsMode" . }}
{{- if eq $mode "generated" }}
{{- (include "yuniplace.generatedTLS" . | fromYaml).caCert | b64enc }}
{{- else if eq $mode "existing" }}
{{- if .Values.webhook.tls.caBundle }}
{{- .Values.webhook.tls.caBundle }}
{{- else }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.webhook.tls.existingSecret }}
{{- $ca := "" }}
{{- if and $secret $secret.data }}{{ $ca = index $secret.data "ca.crt" | default "" }}{{ end }}
{{- required (printf "webhook.tls.caBundle is required: Secret %s/%s has no ca.crt (or could not be read, as with helm template)" .Release.Namespace .Values.webhook.tls.existingSecret) $ca }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Match conditions (CEL): the apiserver calls the webhooks only for pods carrying gang annotations, and
workloads whose pod template carries them, so with failurePolicy Fail a webhook that is down never
blocks any other pod or workload.
*/}}
{{- define "yuniplace.gangPodCEL" -}}
{{- include "yuniplace.gangMetadataCEL" "object.metadata" }}
{{- end }}

{{/*
Whether the metadata at a CEL path (e.g. "object.metadata") carries a gang marker of any dialect.
*/}}
{{- define "yuniplace.gangMetadataCEL" -}}
{{- $m := . -}}
(has({{ $m }}.annotations) && ('yunikorn.apache.org/task-groups' in {{ $m }}.annotations || 'yunikorn.apache.org/task-group-name' in {{ $m }}.annotations || 'gang.scheduling.koordinator.sh/name' in {{ $m }}.annotations || 'scheduling.k8s.io/group-name' in {{ $m }}.annotations)) || (has({{ $m }}.labels) && ('pod-group.scheduling.sigs.k8s.io/name' in {{ $m }}.labels || 'scheduling.x-k8s.io/pod-group' in {{ $m }}.labels))
{{- end }}

{{/*
CEL testing that every field along a path exists; call with (list "object" "spec.template"). A missing
field is an evaluation error in CEL, which failurePolicy Fail would turn into a refusal.
*/}}
{{- define "yuniplace.hasPathCEL" -}}
{{- $prefix := index . 0 -}}
{{- $terms := list -}}
{{- range splitList "." (index . 1) -}}
{{- $prefix = printf "%s.%s" $prefix . -}}
{{- $terms = append $terms (printf "has(%s)" $prefix) -}}
{{- end -}}
{{- join " && " $terms -}}
{{- end }}

{{/*
The workloads the mutating webhook records the requester of (call with the pod template's path, e.g.
"spec.template"): those whose pod template carries gang markers, at creation, and on an update that
changes the pod template (the record lives there; updates that leave it, such as scaling, are never sent).
*/}}
{{- define "yuniplace.gangTemplateCEL" -}}
{{- $path := . -}}
{{- $template := printf "object.%s" $path -}}
{{- $old := printf "oldObject.%s" $path -}}
{{ include "yuniplace.hasPathCEL" (list "object" (printf "%s.metadata" $path)) }} && ({{ include "yuniplace.gangMetadataCEL" (printf "%s.metadata" $template) }}) && (request.operation == 'CREATE' || !({{ include "yuniplace.hasPathCEL" (list "oldObject" $path) }}) || {{ $template }} != {{ $old }})
{{- end }}

{{/*
Whether an update changes a pod's record of its requester (yunikorn.apache.org/user.info): sent to
the validating webhook whoever makes it.
*/}}
{{- define "yuniplace.recordChangedCEL" -}}
{{- $key := "'yunikorn.apache.org/user.info'" -}}
{{- $new := printf "(has(object.metadata.annotations) && %s in object.metadata.annotations)" $key -}}
{{- $old := printf "(has(oldObject.metadata.annotations) && %s in oldObject.metadata.annotations)" $key -}}
({{ $new }} != {{ $old }} || ({{ $new }} && {{ $old }} && object.metadata.annotations[{{ $key }}] != oldObject.metadata.annotations[{{ $key }}]))
{{- end }}

{{/*
The admission mode, checked: `capacity` (the default) or `off`. YAML reads a bare `off` as false.
*/}}
{{- define "yuniplace.admission" -}}
{{- $mode := .Values.admission | toString -}}
{{- if eq $mode "false" }}{{ $mode = "off" }}{{ end -}}
{{- if not (has $mode (list "capacity" "off")) -}}
{{- fail (printf "admission must be capacity or off, not %q" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end }}

{{/*
placeholders, checked: when-needed or always.
*/}}
{{- define "yuniplace.placeholders" -}}
{{- $mode := .Values.placeholders | toString -}}
{{- if not (has $mode (list "when-needed" "always")) -}}
{{- fail (printf "placeholders must be when-needed or always, not %q" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end }}

{{/*
webhook.rewriteSchedulerName, checked: auto, always or never (true and false read as always and never).
*/}}
{{- define "yuniplace.rewriteSchedulerName" -}}
{{- $mode := .Values.webhook.rewriteSchedulerName | toString -}}
{{- $mode = get (dict "true" "always" "false" "never") $mode | default $mode -}}
{{- if not (has $mode (list "auto" "always" "never")) -}}
{{- fail (printf "webhook.rewriteSchedulerName must be auto, always or never, not %q" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end }}

{{/*
webhook.rewrittenSchedulers, checked: scheduler names (DNS subdomains, never the default scheduler),
since each is written into the mutating webhook's CEL match condition; one per line.
*/}}
{{- define "yuniplace.rewrittenSchedulers" -}}
{{- $names := .Values.webhook.rewrittenSchedulers -}}
{{- if not (kindIs "slice" $names) -}}
{{- fail "webhook.rewrittenSchedulers must be a list of scheduler names" -}}
{{- end -}}
{{- range $names -}}
{{- $name := . | toString -}}
{{- if or (gt (len $name) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $name)) (eq $name "default-scheduler") -}}
{{- fail (printf "webhook.rewrittenSchedulers: %q is not another scheduler's name (a DNS subdomain, not default-scheduler)" $name) -}}
{{- end }}
{{ $name }}
{{- end -}}
{{- end }}

{{/*
CEL: the pod names one of the schedulers whose pods are taken over.
*/}}
{{- define "yuniplace.rewrittenSchedulerCEL" -}}
{{- $quoted := list -}}
{{- range (include "yuniplace.rewrittenSchedulers" . | trim | splitList "\n") -}}
{{- if . }}{{- $quoted = append $quoted (printf "'%s'" .) -}}{{- end -}}
{{- end -}}
has(object.spec.schedulerName) && object.spec.schedulerName in [{{ join ", " $quoted }}]
{{- end }}

{{/*
webhook.accessControl as the webhook's flags (YAML list items, quoted: patterns hold `:`, `#`, `$`).
*/}}
{{- define "yuniplace.accessControlArgs" -}}
{{- $access := .Values.webhook.accessControl -}}
{{- $trust := $access.trustControllers | toString -}}
{{- if not (has $trust (list "true" "false")) -}}
{{- fail (printf "webhook.accessControl.trustControllers must be true or false, not %q" $trust) -}}
{{- end -}}
{{- $system := include "yuniplace.patterns" (list "systemUsers" $access.systemUsers) | fromJsonArray -}}
{{- if or (eq $trust "false") (not $system) }}
- --no-trust-controllers
{{- end }}
{{- range $system }}
- {{ printf "--system-users=%s" . | quote }}
{{- end }}
{{- range include "yuniplace.patterns" (list "externalUsers" $access.externalUsers) | fromJsonArray }}
- {{ printf "--external-users=%s" . | quote }}
{{- end }}
{{- range include "yuniplace.patterns" (list "externalGroups" $access.externalGroups) | fromJsonArray }}
- {{ printf "--external-groups=%s" . | quote }}
{{- end }}
{{- end }}

{{/*
A list of patterns of webhook.accessControl as JSON; call with (list "valueName" value). A string is read
as YuniKorn's configmap writes these: comma-separated, blanks around each trimmed, empty ones skipped. An
empty pattern in a list, which would match every name, is refused.
*/}}
{{- define "yuniplace.patterns" -}}
{{- $name := index . 0 -}}
{{- $value := index . 1 | default list -}}
{{- $patterns := list -}}
{{- if kindIs "string" $value -}}
{{- range splitList "," $value -}}
{{- with trim . }}{{ $patterns = append $patterns . }}{{ end -}}
{{- end -}}
{{- else -}}
{{- range $value -}}
{{- if not (toString .) -}}
{{- fail (printf "webhook.accessControl.%s: an empty pattern would match every name" $name) -}}
{{- end -}}
{{- $patterns = append $patterns (toString .) -}}
{{- end -}}
{{- end -}}
{{- $patterns | toJson -}}
{{- end }}

{{/*
What a started gang that loses a member does by default, checked: none, restart or release.
*/}}
{{- define "yuniplace.memberLostPolicy" -}}
{{- $policy := .Values.memberLost.policy | toString -}}
{{- if not (has $policy (list "none" "restart" "release")) -}}
{{- fail (printf "memberLost.policy must be none, restart or release, not %q" $policy) -}}
{{- end -}}
{{- $policy -}}
{{- end }}

{{/*
The Strict-mode backoff, checked: a number of seconds greater than 0.
*/}}
{{- define "yuniplace.strictBackoff" -}}
{{- include "yuniplace.positiveSeconds" (list "strictBackoffSeconds" .Values.strictBackoffSeconds) -}}
{{- end }}

{{/*
A value that must be a number of seconds greater than 0; call with (list "valueName" value).
*/}}
{{- define "yuniplace.positiveSeconds" -}}
{{- $name := index . 0 -}}
{{- $seconds := index . 1 | toString -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?$" $seconds) -}}
{{- fail (printf "%s must be a number of seconds greater than 0, not %q" $name $seconds) -}}
{{- end -}}
{{- if le (float64 $seconds) 0.0 -}}
{{- fail (printf "%s must be greater than 0, not %s" $name $seconds) -}}
{{- end -}}
{{- $seconds -}}
{{- end }}

{{/*
A value that must be a whole number (0 for no limit); call with (list "valueName" value).
*/}}
{{- define "yuniplace.count" -}}
{{- $name := index . 0 -}}
{{- $count := index . 1 | toString -}}
{{- if not (regexMatch "^[0-9]+$" $count) -}}
{{- fail (printf "%s must be a whole number (0 for no limit), not %q" $name $count) -}}
{{- end -}}
{{- $count -}}
{{- end }}

{{/*
Pods never sent to the webhooks: placeholders (labelled yuniplace.io/placeholder=true) and namespaces
outside the watched scope.
*/}}
{{- define "yuniplace.webhookSelectors" -}}
{{- include "yuniplace.webhookSelectorsExcept" (list . list) }}
{{- end }}

{{/*
The selectors of a webhook, with more matchExpressions on namespaces; call with (list . expressions).
*/}}
{{- define "yuniplace.webhookSelectorsExcept" -}}
{{- $extra := index . 1 -}}
{{- with index . 0 -}}
namespaceSelector:
  {{- with .Values.webhook.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    {{- if .Values.watchNamespace }}
    - key: kubernetes.io/metadata.name
      operator: In
      values:
        - {{ .Values.watchNamespace | quote }}
    {{- else }}
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range concat .Values.webhook.excludedNamespaces (list .Release.Namespace) | uniq }}
        - {{ . | quote }}
        {{- end }}
    {{- end }}
    {{- with .Values.webhook.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $extra }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
objectSelector:
  matchExpressions:
    # Exactly what the controller takes for a placeholder: any other value is an ordinary pod's label.
    - key: yuniplace.io/placeholder
      operator: NotIn
      values: ["true"]
{{- end }}
{{- end }}

{{/*
An update is sent to the validating webhook only when it changes a pod's record of its requester, or
its annotations or labels (what yuniplace reads can be edited on a running pod) other than by the
controller's own writes.
*/}}
{{- define "yuniplace.editedByOthersCEL" -}}
{{ include "yuniplace.recordChangedCEL" . }} || (request.userInfo.username != 'system:serviceaccount:{{ .Release.Namespace }}:{{ include "yuniplace.serviceAccountName" . }}' && (has(object.metadata.annotations) != has(oldObject.metadata.annotations) || (has(object.metadata.annotations) && object.metadata.annotations != oldObject.metadata.annotations) || has(object.metadata.labels) != has(oldObject.metadata.labels) || (has(object.metadata.labels) && object.metadata.labels != oldObject.metadata.labels)))
{{- end }}

{{/*
clientConfig of a webhook; call with (list $ "/mutate").
*/}}
{{- define "yuniplace.webhookClientConfig" -}}
{{- $ := index . 0 }}
{{- $path := index . 1 -}}
clientConfig:
  {{- if $.Values.webhook.url }}
  {{- if not (hasPrefix "https://" $.Values.webhook.url) }}
  {{- fail "webhook.url must start with https:// (the apiserver only calls webhooks over TLS)" }}
  {{- end }}
  url: {{ printf "%s%s" (trimSuffix "/" $.Values.webhook.url) $path | quote }}
  {{- else }}
  service:
    name: {{ include "yuniplace.webhookServiceName" $ }}
    namespace: {{ $.Release.Namespace }}
    path: {{ $path }}
    port: {{ $.Values.webhook.service.port }}
  {{- end }}
  {{- with include "yuniplace.caBundle" $ }}
  caBundle: {{ . }}
  {{- end }}
{{- end }}

{{/*
Annotations of the webhook configurations: cert-manager's CA injection when it issues the certificate.
*/}}
{{- define "yuniplace.webhookAnnotations" -}}
{{- if eq (include "yuniplace.tlsMode" .) "certManager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "yuniplace.webhookServiceName" .) }}
{{- end }}
{{- end }}

{{/*
The queues ConfigMap as `--queues-configmap` takes it (NAMESPACE/NAME), or empty for none.
*/}}
{{- define "yuniplace.queuesConfigMapName" -}}
{{- .Values.queues.configMap | default (ternary (printf "%s-queues" (include "yuniplace.fullname" .) | trunc 63 | trimSuffix "-") "" (ne .Values.queues.queuesYaml "")) -}}
{{- end }}

{{- define "yuniplace.queuesConfigMapNamespace" -}}
{{- .Values.queues.configMapNamespace | default .Release.Namespace -}}
{{- end }}

{{- define "yuniplace.queuesConfigMap" -}}
{{- $name := include "yuniplace.queuesConfigMapName" . -}}
{{- if $name -}}
{{- if ne (include "yuniplace.admission" .) "capacity" -}}
{{- fail "queues need admission: capacity (queues decide which gang reserves first)" -}}
{{- end -}}
{{- if and .Values.queues.queuesYaml (ne (include "yuniplace.queuesConfigMapNamespace" .) .Release.Namespace) -}}
{{- fail "queues.queuesYaml creates the ConfigMap in the release namespace: leave queues.configMapNamespace empty" -}}
{{- end -}}
{{- printf "%s/%s" (include "yuniplace.queuesConfigMapNamespace" .) $name -}}
{{- end -}}
{{- end }}
