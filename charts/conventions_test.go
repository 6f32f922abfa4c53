package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// valuesFile writes a values file and returns its path.
func valuesFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// workloads returns the chart's Deployment and DaemonSets in a rendering.
func workloads(objs []object) []object {
	var w []object
	for _, o := range objs {
		if k := str(o, "kind"); k == "Deployment" || k == "DaemonSet" {
			w = append(w, o)
		}
	}
	return w
}

// withPool renders with one node pool besides the values files given.
func withPool(t *testing.T, args ...string) []object {
	t.Helper()
	return render(t, append([]string{"--set", "nodePools[0].name=k0s,nodePools[0].kubeletDir=/k,nodePools[0].nodeSelector.a=b"}, args...)...)
}

// TestSchema: values.schema.json refuses a misspelt key and a value of the
// wrong type, at any depth, in helm template, install and lint alike.
func TestSchema(t *testing.T) {
	for _, c := range []struct{ values, want string }{
		{"controller:\n  replica: 3\n", "at '/controller': additional properties 'replica' not allowed"},
		{"imagePullSecret: [{name: x}]\n", "additional properties 'imagePullSecret' not allowed"},
		{"nodePools:\n  - {name: k0s, kubeletDir: /k, nodeSelector: {a: b}, resource: {}}\n", "at '/nodePools/0': additional properties 'resource' not allowed"},
		{"metrics:\n  serviceMonitor: {enable: true}\n", "at '/metrics/serviceMonitor': additional properties 'enable' not allowed"},
		{"controller:\n  replicas: two\n", "at '/controller/replicas': got string, want integer"},
		{"metrics:\n  enabled: \"yes\"\n", "at '/metrics/enabled': got string, want boolean"},
		{"commonLabels: {team: 1}\n", "at '/commonLabels/team': got number, want string"},
		{"kubeletDir: var/lib/kubelet\n", "at '/kubeletDir': 'var/lib/kubelet' does not match pattern"},
		{"image: {pullPolicy: Sometimes}\n", "at '/image/pullPolicy': value must be one of"},
		{"image: {digest: v0.3.0}\n", "at '/image/digest': 'v0.3.0' does not match pattern"},
		{"controller:\n  podDisruptionBudget: {maxUnavailable: 0}\n", "at '/controller/podDisruptionBudget/maxUnavailable'"},
	} {
		f := valuesFile(t, c.values)
		if out := renderFails(t, "-f", f); !strings.Contains(out, c.want) {
			t.Errorf("helm template with %q: want %q in\n%s", c.values, c.want, out)
		}
		out, err := exec.Command(helmBin(t), "lint", "--strict", chart, "-f", f).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("helm lint --strict with %q: %v, want %q in\n%s", c.values, err, c.want, out)
		}
	}
}

// TestLabels: every object carries the standard labels and commonLabels
// (the chart's own win over commonLabels); pods too, with their component's
// podLabels and podAnnotations; the selectors stay name and component (a
// Deployment's or DaemonSet's selector cannot change on upgrade).
func TestLabels(t *testing.T) {
	objs := withPool(t, "-f", valuesFile(t, `
commonLabels: {team: storage, app.kubernetes.io/name: other}
controller:
  podLabels: {tier: control}
  podAnnotations: {example.com/scrape: "no"}
node:
  podLabels: {tier: node}
  podAnnotations: {example.com/node: "yes"}
`))
	std := map[string]string{
		"app.kubernetes.io/name": "pav", "app.kubernetes.io/instance": "pav", "app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/part-of": "pav", "app.kubernetes.io/version": "latest", "helm.sh/chart": "pav-0.1.0", "team": "storage",
	}
	hasLabels := func(what string, labels any) {
		t.Helper()
		m, _ := labels.(map[string]any)
		for k, v := range std {
			if m[k] != v {
				t.Errorf("%s: label %s=%v, want %s", what, k, m[k], v)
			}
		}
	}
	for _, o := range objs {
		if str(o, "kind") != "CustomResourceDefinition" {
			hasLabels(key(o), get(o, "metadata", "labels"))
		}
	}
	for _, o := range workloads(objs) {
		component, pod := "controller-agent", "control"
		if str(o, "kind") == "DaemonSet" {
			component, pod = "node-agent", "node"
		}
		hasLabels(key(o)+"'s pods", get(o, "spec", "template", "metadata", "labels"))
		if l := str(o, "spec", "template", "metadata", "labels", "tier"); l != pod {
			t.Errorf("%s's pods: podLabels tier=%q, want %s", key(o), l, pod)
		}
		for _, l := range []any{get(o, "metadata", "labels"), get(o, "spec", "template", "metadata", "labels")} {
			if c := get(l, "app.kubernetes.io/component"); c != component {
				t.Errorf("%s: component %v", key(o), c)
			}
		}
		want := map[string]any{"app.kubernetes.io/name": "pav", "app.kubernetes.io/component": component}
		if str(o, "metadata", "name") == "node-agent-k0s" {
			want["pav-node-pool"] = "k0s"
		}
		if d := cmp.Diff(want, get(o, "spec", "selector", "matchLabels")); d != "" {
			t.Errorf("%s's selector (-want +got):\n%s", key(o), d)
		}
	}
	if a := get(find(t, objs, "Deployment", "controller-agent"), "spec", "template", "metadata", "annotations"); !reflect.DeepEqual(a, map[string]any{"example.com/scrape": "no"}) {
		t.Errorf("controller pods' annotations: %v", a)
	}
	for _, ds := range []string{"node-agent", "node-agent-k0s"} {
		if a := get(find(t, objs, "DaemonSet", ds), "spec", "template", "metadata", "annotations"); !reflect.DeepEqual(a, map[string]any{"example.com/node": "yes"}) {
			t.Errorf("%s pods' annotations: %v", ds, a)
		}
	}
}

// TestPodOptions: imagePullSecrets on every pod; each component's extraArgs
// after its own arguments, and only there.
func TestPodOptions(t *testing.T) {
	objs := withPool(t, "--set", "imagePullSecrets[0].name=regcred,controller.extraArgs={--v=5,--shutdown-delay=3s},node.extraArgs={--v=6}")
	for _, o := range workloads(objs) {
		if s := get(o, "spec", "template", "spec", "imagePullSecrets"); !reflect.DeepEqual(s, []any{map[string]any{"name": "regcred"}}) {
			t.Errorf("%s: imagePullSecrets %v", key(o), s)
		}
		a := args(t, o)
		want := []string{"--v=5", "--shutdown-delay=3s"}
		if str(o, "kind") == "DaemonSet" {
			want = []string{"--v=6"}
		}
		if got := a[len(a)-len(want):]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: args %v, want them to end with %v", key(o), a, want)
		}
	}
	for _, o := range workloads(render(t)) {
		if s := get(o, "spec", "template", "spec", "imagePullSecrets"); s != nil {
			t.Errorf("%s by default: imagePullSecrets %v", key(o), s)
		}
	}
}

// TestUpdateStrategy: the Deployment's and the DaemonSets' strategies, a
// pool's own or node's.
func TestUpdateStrategy(t *testing.T) {
	objs := withPool(t)
	if s := toYAML(get(find(t, objs, "Deployment", "controller-agent"), "spec", "strategy")); s != "rollingUpdate:\n  maxSurge: 1\n  maxUnavailable: 0\ntype: RollingUpdate\n" {
		t.Errorf("controller's default strategy:\n%s", s)
	}
	for _, ds := range []string{"node-agent", "node-agent-k0s"} {
		if s := toYAML(get(find(t, objs, "DaemonSet", ds), "spec", "updateStrategy")); s != "rollingUpdate:\n  maxUnavailable: 1\ntype: RollingUpdate\n" {
			t.Errorf("%s's default updateStrategy:\n%s", ds, s)
		}
	}
	objs = render(t, "-f", valuesFile(t, `
controller:
  updateStrategy: {type: Recreate, rollingUpdate: null}
node:
  updateStrategy: {type: OnDelete, rollingUpdate: null}
nodePools:
  - {name: k0s, kubeletDir: /k, nodeSelector: {a: b}}
  - {name: fast, kubeletDir: /f, nodeSelector: {f: b}, updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 25%}}}
`))
	for kind, want := range map[string]string{
		"Deployment controller-agent": "type: Recreate\n", "DaemonSet node-agent": "type: OnDelete\n",
		"DaemonSet node-agent-k0s": "type: OnDelete\n", "DaemonSet node-agent-fast": "rollingUpdate:\n  maxUnavailable: 25%\ntype: RollingUpdate\n",
	} {
		k, name, _ := strings.Cut(kind, " ")
		field := "updateStrategy"
		if k == "Deployment" {
			field = "strategy"
		}
		if s := toYAML(get(find(t, objs, k, name), "spec", field)); s != want {
			t.Errorf("%s's %s:\n%s\nwant:\n%s", kind, field, s, want)
		}
	}
}

// podOf converts a workload's pod template for the Pod Security evaluator.
func podOf(t *testing.T, o object) (*metav1.ObjectMeta, *corev1.PodSpec) {
	t.Helper()
	b, err := yaml.Marshal(get(o, "spec", "template"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl corev1.PodTemplateSpec
	if err := yaml.UnmarshalStrict(b, &tmpl); err != nil {
		t.Fatalf("%s's pod template: %v", key(o), err)
	}
	return &tmpl.ObjectMeta, &tmpl.Spec
}

// TestPodSecurity: the controller meets the restricted Pod Security Standard
// (Kubernetes' own evaluator); the node plugin is privileged, not even
// baseline, which is why the namespace is labelled to enforce privileged.
func TestPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := withPool(t, "--set", "controller.webhook.clientAuth.caConfigMap=ca,metrics.enabled=true")
	for _, o := range workloads(objs) {
		meta, spec := podOf(t, o)
		level := psaapi.LevelRestricted
		if str(o, "kind") == "DaemonSet" {
			level = psaapi.LevelBaseline
		}
		results := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, meta, spec))
		switch {
		case level == psaapi.LevelRestricted && !results.Allowed:
			t.Errorf("%s is not restricted: %s: %s", key(o), results.ForbiddenReason(), results.ForbiddenDetail())
		case level == psaapi.LevelBaseline && results.Allowed:
			t.Errorf("%s meets baseline: is the namespace's privileged level still needed?", key(o))
		}
	}
	ns := find(t, render(t, "--set", "namespace.create=true", "--namespace", "storage"), "Namespace", "storage")
	if l := str(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce"); l != "privileged" {
		t.Errorf("Namespace storage: pod-security.kubernetes.io/enforce=%q, want privileged", l)
	}
}

// TestDisruptionBudget: node drains evict one controller replica at a time and
// are never blocked: no budget with one replica, none of 0.
func TestDisruptionBudget(t *testing.T) {
	pdb := find(t, render(t), "PodDisruptionBudget", "controller-agent")
	want := "maxUnavailable: 1\nselector:\n  matchLabels:\n    app.kubernetes.io/component: controller-agent\n    app.kubernetes.io/name: pav\n"
	if s := toYAML(get(pdb, "spec")); s != want {
		t.Errorf("PodDisruptionBudget controller-agent:\n%s\nwant:\n%s", s, want)
	}
	for _, set := range []string{"controller.replicas=1", "controller.podDisruptionBudget.enabled=false"} {
		for _, o := range render(t, "--set", set) {
			if str(o, "kind") == "PodDisruptionBudget" {
				t.Errorf("%s: %s", set, key(o))
			}
		}
	}
}

// TestTopologySpread: the controller's replicas spread over nodes by default;
// each constraint counts the controller's pods of one revision unless it says
// otherwise.
func TestTopologySpread(t *testing.T) {
	spread := func(objs []object) string {
		return toYAML(get(find(t, objs, "Deployment", "controller-agent"), "spec", "template", "spec", "topologySpreadConstraints"))
	}
	want := `- labelSelector:
    matchLabels:
      app.kubernetes.io/component: controller-agent
      app.kubernetes.io/name: pav
  matchLabelKeys:
  - pod-template-hash
  maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
`
	if s := spread(render(t)); s != want {
		t.Errorf("default:\n%s\nwant:\n%s", s, want)
	}
	got := spread(render(t, "-f", valuesFile(t, `
controller:
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app.kubernetes.io/name: pav}}, matchLabelKeys: []}
`)))
	want = `- labelSelector:
    matchLabels:
      app.kubernetes.io/name: pav
  matchLabelKeys: []
  maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: DoNotSchedule
`
	if got != want {
		t.Errorf("a constraint with its own selector:\n%s\nwant:\n%s", got, want)
	}
	if s := spread(render(t, "--set", "controller.topologySpreadConstraints=null")); s != "null\n" {
		t.Errorf("without constraints:\n%s", s)
	}
}

// TestServiceMonitor: off by default; on, it selects both metrics Services
// (and no other) by labels and scrapes their metrics port with Prometheus's
// own token (PaV's /metrics refuses anonymous scrapes); it needs them.
func TestServiceMonitor(t *testing.T) {
	for _, o := range render(t, "--set", "metrics.enabled=true") {
		if str(o, "kind") == "ServiceMonitor" {
			t.Errorf("by default: %s", key(o))
		}
	}
	objs := render(t, "--set", "metrics.enabled=true,metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prom,metrics.serviceMonitor.interval=15s")
	sm := find(t, objs, "ServiceMonitor", "pav")
	if l := str(sm, "metadata", "labels", "release"); l != "prom" {
		t.Errorf("ServiceMonitor labels: %v", get(sm, "metadata", "labels"))
	}
	if s := toYAML(get(sm, "spec", "endpoints")); s != "- bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n  interval: 15s\n  port: metrics\n" {
		t.Errorf("ServiceMonitor endpoints:\n%s", s)
	}
	b, err := yaml.Marshal(get(sm, "spec", "selector"))
	if err != nil {
		t.Fatal(err)
	}
	var sel metav1.LabelSelector
	if err := yaml.UnmarshalStrict(b, &sel); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatal(err)
	}
	var selected []string
	for _, o := range objs {
		if str(o, "kind") != "Service" {
			continue
		}
		set := labels.Set{}
		for k, v := range get(o, "metadata", "labels").(map[string]any) {
			set[k] = v.(string)
		}
		if selector.Matches(set) {
			selected = append(selected, str(o, "metadata", "name"))
		}
	}
	if strings.Join(selected, " ") != "pav-controller-metrics pav-node-metrics" {
		t.Errorf("the ServiceMonitor selects Services %v", selected)
	}
	if out := renderFails(t, "--set", "metrics.serviceMonitor.enabled=true"); !strings.Contains(out, "metrics.serviceMonitor.enabled needs metrics.enabled") {
		t.Errorf("a ServiceMonitor without metrics: %s", out)
	}
}

// TestPrometheusRule: off by default; when on, beside the ServiceMonitor,
// with its labels, and every alert reads only metrics PaV exports (names
// as the Go sources declare them) in the release's namespace.
func TestPrometheusRule(t *testing.T) {
	for _, o := range render(t, "--set", "metrics.enabled=true,metrics.serviceMonitor.enabled=true") {
		if str(o, "kind") == "PrometheusRule" {
			t.Errorf("by default: %s", key(o))
		}
	}
	if out := renderFails(t, "--set", "metrics.enabled=true,metrics.prometheusRule.enabled=true"); !strings.Contains(out, "metrics.prometheusRule.enabled needs metrics.serviceMonitor.enabled") {
		t.Errorf("a PrometheusRule without a ServiceMonitor: %s", out)
	}
	objs := render(t, "--set", "metrics.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.prometheusRule.labels.release=prom")
	rule := find(t, objs, "PrometheusRule", "pav")
	if l := str(rule, "metadata", "labels", "release"); l != "prom" {
		t.Errorf("PrometheusRule labels: %v", get(rule, "metadata", "labels"))
	}
	exported := exportedMetrics(t)
	metric := regexp.MustCompile(`\b(pav|workqueue|rest_client|leader_election)_[a-z_]+\b`)
	var alerts int
	for _, g := range get(rule, "spec", "groups").([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			expr, _ := r["expr"].(string)
			alerts++
			names := metric.FindAllString(expr, -1)
			if len(names) == 0 {
				t.Errorf("alert %v reads none of PaV's metrics: %s", r["alert"], expr)
			}
			for _, n := range names {
				if !exported[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] {
					t.Errorf("alert %v reads %s, which PaV does not export", r["alert"], n)
				}
			}
			if !strings.Contains(expr, `namespace="pav"`) {
				t.Errorf("alert %v is not scoped to the release's namespace: %s", r["alert"], expr)
			}
		}
	}
	if alerts == 0 {
		t.Error("no alerts")
	}
	// Provisioning fails by StorageClass (its parameters) as much as by
	// provisioner: the alert groups by both, so one failing class is seen
	// beside another that works.
	provisioningByClass := false
	for _, g := range get(rule, "spec", "groups").([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			if expr, _ := r["expr"].(string); r["alert"] == "PavProvisioningFailing" {
				provisioningByClass = strings.Count(expr, "sum by (provisioner, class)") == 2
			}
		}
	}
	if !provisioningByClass {
		t.Error("PavProvisioningFailing does not group by provisioner and class")
	}
	// With no controller scraped there is no series at all, and a
	// comparison of an empty sum never fires: the leader alert needs
	// absent() of the same series.
	for _, g := range get(rule, "spec", "groups").([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			r := r.(map[string]any)
			if r["alert"] == "PavNoControllerLeader" {
				expr, _ := r["expr"].(string)
				if !strings.Contains(expr, `absent(leader_election_master_status{namespace="pav",name="pav-controller"})`) {
					t.Errorf("PavNoControllerLeader does not fire when no controller is scraped: %s", expr)
				}
				return
			}
		}
	}
	t.Error("no alert PavNoControllerLeader")
}

// exportedMetrics: the metric names declared in PaV's Go sources (each
// metric is declared with its whole name as a string literal).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"((pav|workqueue|rest_client|leader_election)_[a-z_]+)"`)
	names := map[string]bool{}
	for _, dir := range []string{"../controller", "../controller/webhook", "../nodeagent", "../cmd/pav"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
				names[m[1]] = true
			}
		}
	}
	if !names["pav_controller_operations_total"] {
		t.Fatalf("no metric declarations found in PaV's sources: %v", names)
	}
	return names
}
