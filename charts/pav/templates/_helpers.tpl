{{/*
pav.labels: the labels of every object, as YAML: commonLabels, then the
standard app.kubernetes.io labels (over commonLabels). Argument: the chart's
root context, or a dict with
  root       the chart's root context
  component  app.kubernetes.io/component (optional)
  extra      more labels, under the standard ones (optional: podLabels)
*/}}
{{- define "pav.labels" -}}
{{- $root := .root | default . -}}
{{- $l := merge (deepCopy (.extra | default dict)) (deepCopy ($root.Values.commonLabels | default dict)) -}}
{{- $std := dict
  "helm.sh/chart" (printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_")
  "app.kubernetes.io/name" "pav"
  "app.kubernetes.io/instance" $root.Release.Name
  "app.kubernetes.io/version" $root.Chart.AppVersion
  "app.kubernetes.io/managed-by" $root.Release.Service
  "app.kubernetes.io/part-of" "pav" -}}
{{- with .component }}{{ $_ := set $std "app.kubernetes.io/component" . }}{{ end -}}
{{- toYaml (mergeOverwrite $l $std) -}}
{{- end -}}

{{/*
pav.selectorLabels: the labels a component's selectors match (unchanged
across chart versions: a Deployment's or DaemonSet's selector is immutable).
Argument: the component's name.
*/}}
{{- define "pav.selectorLabels" -}}
app.kubernetes.io/name: pav
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{/* The image of PaV's containers: image.repository@image.digest when a digest is given (a
registry's name cannot move to other content), else image.repository:image.tag (tag default:
appVersion). */}}
{{- define "pav.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
pav.nodeAffinity: the affinity of the default node plugin DaemonSet, node.affinity
with, when nodePools are set, a required node affinity that keeps it off their nodes:
every term of node.affinity's required nodeSelectorTerms (or one term if it has none)
gets "key NotIn [value]" for each label of each pool's nodeSelector.
*/}}
{{- define "pav.nodeAffinity" -}}
{{- $aff := deepCopy (.Values.node.affinity | default dict) -}}
{{- $excl := list -}}
{{- range .Values.nodePools -}}
{{- range $k, $v := .nodeSelector -}}
{{- $excl = append $excl (dict "key" $k "operator" "NotIn" "values" (list $v)) -}}
{{- end -}}
{{- end -}}
{{- if $excl -}}
{{- $na := $aff.nodeAffinity | default dict -}}
{{- $req := $na.requiredDuringSchedulingIgnoredDuringExecution | default dict -}}
{{- $terms := $req.nodeSelectorTerms | default (list dict) -}}
{{- $new := list -}}
{{- range $terms -}}
{{- $t := deepCopy . -}}
{{- $_ := set $t "matchExpressions" (concat ($t.matchExpressions | default list) $excl) -}}
{{- $new = append $new $t -}}
{{- end -}}
{{- $_ := set $req "nodeSelectorTerms" $new -}}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ := set $aff "nodeAffinity" $na -}}
{{- end -}}
{{- if $aff -}}
{{ toYaml $aff }}
{{- end -}}
{{- end -}}

{{/*
pav.nodeAgent: a node plugin DaemonSet. Argument: a dict with
  root         the chart's root context
  name         the DaemonSet's name
  pool         the pool's name, "" for the default DaemonSet
  updateStrategy
  kubeletDir   the kubelet root directory of its nodes
  runtimeSocket containerd's socket on its nodes ("": none)
  maxVolumesPerNode its nodes' volume limit per PavProvisioner (0: none)
  nodeSelector, tolerations, affinity, resources
*/}}
{{- define "pav.nodeAgent" -}}
{{- $v := .root.Values -}}
{{- $poolLabels := dict -}}
{{- with .pool }}{{ $_ := set $poolLabels "pav-node-pool" . }}{{ end -}}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "pav.labels" (dict "root" .root "component" "node-agent" "extra" $poolLabels) | nindent 4 }}
spec:
  selector:
    matchLabels: {{- include "pav.selectorLabels" "node-agent" | nindent 6 }}
      {{- with .pool }}
      pav-node-pool: {{ . }}
      {{- end }}
  {{- with .updateStrategy }}
  updateStrategy: {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      labels: {{- include "pav.labels" (dict "root" .root "component" "node-agent" "extra" (merge (deepCopy $poolLabels) ($v.node.podLabels | default dict))) | nindent 8 }}
      {{- with $v.node.podAnnotations }}
      annotations: {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: node
      # The host PID namespace: recovering a volume reaches into the running
      # client containers' mount namespaces, by their processes.
      hostPID: true
      priorityClassName: {{ $v.node.priorityClassName }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .affinity }}
      affinity: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: node
          image: {{ include "pav.image" .root }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          # --kubelet-dir and the kubelet volume below: the kubelet's root
          # directory, mounted at the same path (kubelet passes host paths).
          # --runtime-endpoint and the runtime volume: containerd's socket,
          # whose task exit events tell that PaV's pods' containers exited
          # before the pod status does; its directory is mounted, so that a
          # restarted containerd's new socket is seen.
          args:
            - node
            - --v={{ $v.logVerbosity }}
            {{- if ne $v.logFormat "text" }}
            - --logging-format={{ $v.logFormat }}
            {{- end }}
            - --kubelet-dir={{ .kubeletDir }}
            - --runtime-endpoint={{ with .runtimeSocket }}unix://{{ . }}{{ end }}
            {{- with .maxVolumesPerNode }}
            - --max-volumes-per-node={{ int64 . }}
            {{- end }}
            {{- if $v.metrics.enabled }}
            - --metrics-endpoint=:{{ $v.metrics.nodePort }}
            {{- end }}
            {{- with $v.node.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            # GOMEMLIMIT: unset, pav sets 80% of resources.limits.memory. GOGC: unset, pav uses 50.
          securityContext:
            privileged: true
          ports:
            - name: http
              containerPort: 8081
            {{- if $v.metrics.enabled }}
            - name: metrics
              containerPort: {{ $v.metrics.nodePort }}
            {{- end }}
          # Ready once caches synced and drivers are served; restarted if a
          # cache stops watching or a driver's socket is deleted under it.
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 5
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 10
            failureThreshold: 3
          volumeMounts:
            - name: kubelet
              mountPath: {{ .kubeletDir }}
              mountPropagation: Bidirectional
            - name: dev
              mountPath: /dev
            {{- with .runtimeSocket }}
            - name: runtime
              mountPath: {{ dir . }}
              readOnly: true
            {{- end }}
          resources: {{- toYaml .resources | nindent 12 }}
      volumes:
        - name: kubelet
          hostPath:
            path: {{ .kubeletDir }}
            type: Directory
        - name: dev
          hostPath:
            path: /dev
            type: Directory
        {{- with .runtimeSocket }}
        - name: runtime
          hostPath:
            path: {{ dir . }}
            type: DirectoryOrCreate
        {{- end }}
{{- end -}}
