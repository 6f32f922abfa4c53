// Package charts_test checks the Helm chart charts/pav with the real helm binary
// (`make verify-chart`, which builds it with hack/ensure-helm.sh and sets PAV_HELM;
// without PAV_HELM these tests skip): its default rendering is deployment.yaml's
// objects, and its values change what they say they change.
package charts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const chart = "pav"

// object is one parsed manifest document.
type object = map[string]any

func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("PAV_HELM")
	if h == "" {
		t.Skip("PAV_HELM is not set: run `make verify-chart` (builds helm with hack/ensure-helm.sh)")
	}
	return h
}

// render runs `helm template` on the chart with args (e.g. --set k=v) and
// returns its objects; namespace pav unless args say otherwise.
func render(t *testing.T, args ...string) []object {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", "pav", chart, "--namespace", "pav"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr.String())
	}
	return parse(t, out)
}

// renderFails runs `helm template` expecting it to fail, and returns its stderr.
func renderFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", "pav", chart, "--namespace", "pav"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("helm template %v succeeded, want an error", args)
	}
	return string(out)
}

// parse splits a YAML stream into objects (JSON types: every number a float64),
// skipping empty documents.
func parse(t *testing.T, stream []byte) []object {
	t.Helper()
	var objs []object
	for i, doc := range splitDocs(stream) {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

func splitDocs(stream []byte) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(string(stream), "\n") {
		if strings.TrimRight(line, "\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

func str(o object, path ...string) string {
	v := get(o, path...)
	s, _ := v.(string)
	return s
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func key(o object) string {
	k := str(o, "kind") + " " + str(o, "metadata", "name")
	if ns := str(o, "metadata", "namespace"); ns != "" {
		k += " -n " + ns
	}
	return k
}

func byKey(t *testing.T, objs []object) map[string]object {
	t.Helper()
	m := map[string]object{}
	for _, o := range objs {
		k := key(o)
		if _, dup := m[k]; dup {
			t.Errorf("%s twice", k)
		}
		m[k] = o
	}
	return m
}

func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if str(o, "kind") == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendering", kind, name)
	return nil
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestLint: helm lint --strict.
func TestLint(t *testing.T) {
	out, err := exec.Command(helmBin(t), "lint", "--strict", chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestDeploymentYAMLIsGenerated: deployment.yaml is the chart's rendering as
// hack/manifests.sh writes it (`make manifests`), byte for byte.
func TestDeploymentYAMLIsGenerated(t *testing.T) {
	helmBin(t)
	out := filepath.Join(t.TempDir(), "deployment.yaml")
	if b, err := exec.Command("../hack/manifests.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("hack/manifests.sh: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deployment.yaml is not the chart's rendering: change charts/pav, then run make manifests")
	}
}

// TestDeploymentYAML: kubectl create -f deployment.yaml creates the CRD and
// the namespace, allowed privileged pods (the node plugin), before anything
// in them; everything else is in that namespace or cluster-scoped, but for
// the pod log RoleBinding in each namespace of pods.namespaces.
func TestDeploymentYAML(t *testing.T) {
	b, err := os.ReadFile("../deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, b)
	if len(objs) < 2 || key(objs[0]) != "CustomResourceDefinition pavprovisioners.pav.albertofaria.github.io" || key(objs[1]) != "Namespace pav" {
		t.Fatalf("deployment.yaml starts with %s, %s; want the CRD, then Namespace pav", key(objs[0]), key(objs[1]))
	}
	if l := str(objs[1], "metadata", "labels", "pod-security.kubernetes.io/enforce"); l != "privileged" {
		t.Errorf("Namespace pav: pod-security.kubernetes.io/enforce=%q, want privileged", l)
	}
	for _, o := range objs[2:] {
		switch ns := str(o, "metadata", "namespace"); {
		case str(o, "kind") == "Namespace" || str(o, "kind") == "CustomResourceDefinition":
			t.Errorf("%s after the first two objects", key(o))
		case ns != "" && ns != "pav" && key(o) != "RoleBinding pav-pod-logs -n default":
			t.Errorf("%s: not in namespace pav", key(o))
		}
	}
	// the chart makes no Namespace unless asked: helm install makes the release's
	for _, o := range render(t) {
		if str(o, "kind") == "Namespace" {
			t.Errorf("by default the chart renders %s", key(o))
		}
	}
}

// TestCRDIsGenerated: the chart's CRD is crds/pavprovisioners.yaml (written by
// make generate, checked by make verify-generated).
func TestCRDIsGenerated(t *testing.T) {
	a, err := os.ReadFile("../crds/pavprovisioners.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("pav/crds/pavprovisioners.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("charts/pav/crds/pavprovisioners.yaml is not crds/pavprovisioners.yaml: run make generate")
	}
}

func container(t *testing.T, o object) map[string]any {
	t.Helper()
	cs, _ := get(o, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers", key(o), len(cs))
	}
	return cs[0].(map[string]any)
}

func args(t *testing.T, o object) []string {
	t.Helper()
	var s []string
	for _, a := range container(t, o)["args"].([]any) {
		s = append(s, a.(string))
	}
	return s
}

func hasArg(t *testing.T, o object, arg string) {
	t.Helper()
	for _, a := range args(t, o) {
		if a == arg {
			return
		}
	}
	t.Errorf("%s: no %s in args %v", key(o), arg, args(t, o))
}

// kubeletPaths returns the node plugin's kubelet volume host path and mount path.
func kubeletPaths(t *testing.T, ds object) (host, mount string) {
	t.Helper()
	return volumePaths(t, ds, "kubelet")
}

// volumePaths returns the host path and mount path of a node plugin's volume.
func volumePaths(t *testing.T, ds object, name string) (host, mount string) {
	t.Helper()
	for _, v := range get(ds, "spec", "template", "spec", "volumes").([]any) {
		if str(v.(map[string]any), "name") == name {
			host = str(v.(map[string]any), "hostPath", "path")
		}
	}
	for _, m := range container(t, ds)["volumeMounts"].([]any) {
		if str(m.(map[string]any), "name") == name {
			mount = str(m.(map[string]any), "mountPath")
		}
	}
	return host, mount
}

// TestRuntimeSocket: node.runtimeSocket is the node plugin's
// --runtime-endpoint, its directory mounted; a pool may have its own; empty
// disables both.
func TestRuntimeSocket(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
node: {runtimeSocket: /run/k3s/containerd/containerd.sock}
nodePools:
  - {name: k0s, kubeletDir: /var/lib/k0s/kubelet, nodeSelector: {k0s: "true"}, runtimeSocket: /run/k0s/containerd.sock}
  - {name: plain, kubeletDir: /var/lib/other, nodeSelector: {other: "true"}}
  - {name: crio, kubeletDir: /var/lib/crio-kubelet, nodeSelector: {crio: "true"}, runtimeSocket: ""}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "-f", values)
	for ds, sock := range map[string]string{
		"node-agent": "/run/k3s/containerd/containerd.sock", "node-agent-k0s": "/run/k0s/containerd.sock",
		"node-agent-plain": "/run/k3s/containerd/containerd.sock", "node-agent-crio": "",
	} {
		o := find(t, objs, "DaemonSet", ds)
		if sock == "" {
			hasArg(t, o, "--runtime-endpoint=")
		} else {
			hasArg(t, o, "--runtime-endpoint=unix://"+sock)
		}
		wantDir := filepath.Dir(sock)
		if sock == "" {
			wantDir = ""
		}
		if host, mount := volumePaths(t, o, "runtime"); host != wantDir || mount != wantDir {
			t.Errorf("%s: runtime volume host path %q, mount path %q; want %q", ds, host, mount, wantDir)
		}
	}
}

// TestMaxVolumesPerNode: node.maxVolumesPerNode is the node plugin's
// --max-volumes-per-node; a pool may have its own; 0 (the default) and unset
// leave the flag out; anything but a whole number in range fails.
func TestMaxVolumesPerNode(t *testing.T) {
	for _, ds := range []string{"node-agent", "node-agent-k0s"} {
		o := find(t, render(t, "--set", "nodePools[0].name=k0s,nodePools[0].kubeletDir=/k,nodePools[0].nodeSelector.a=b"), "DaemonSet", ds)
		for _, a := range args(t, o) {
			if strings.HasPrefix(a, "--max-volumes-per-node") {
				t.Errorf("%s by default: %s, want no limit", ds, a)
			}
		}
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
node: {maxVolumesPerNode: 1000000}
nodePools:
  - {name: small, kubeletDir: /var/lib/small, nodeSelector: {small: "true"}, maxVolumesPerNode: 8}
  - {name: plain, kubeletDir: /var/lib/other, nodeSelector: {other: "true"}}
  - {name: unlimited, kubeletDir: /var/lib/unlimited, nodeSelector: {unlimited: "true"}, maxVolumesPerNode: 0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "-f", values)
	for ds, want := range map[string]string{
		"node-agent": "--max-volumes-per-node=1000000", "node-agent-small": "--max-volumes-per-node=8",
		"node-agent-plain": "--max-volumes-per-node=1000000", "node-agent-unlimited": "",
	} {
		var got []string
		for _, a := range args(t, find(t, objs, "DaemonSet", ds)) {
			if strings.HasPrefix(a, "--max-volumes-per-node") {
				got = append(got, a)
			}
		}
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Errorf("%s: %v, want %q", ds, got, want)
		}
	}
	for bad, msg := range map[string]string{"-1": "minimum", "2147483648": "maximum", "many": "got string, want integer"} {
		if out := renderFails(t, "--set", "node.maxVolumesPerNode="+bad); !strings.Contains(out, "at '/node/maxVolumesPerNode': "+msg) {
			t.Errorf("maxVolumesPerNode=%s: %s", bad, out)
		}
	}
}

// TestKubeletDir: kubeletDir roots both processes' --kubelet-dir and the node
// plugin's host path, and nothing is left at the default.
func TestKubeletDir(t *testing.T) {
	const dir = "/var/lib/k0s/kubelet"
	objs := render(t, "--set", "kubeletDir="+dir)
	ds := find(t, objs, "DaemonSet", "node-agent")
	hasArg(t, ds, "--kubelet-dir="+dir)
	hasArg(t, find(t, objs, "Deployment", "controller-agent"), "--kubelet-dir="+dir)
	if host, mount := kubeletPaths(t, ds); host != dir || mount != dir {
		t.Errorf("node-agent's kubelet volume: host path %q, mount path %q; want %s", host, mount, dir)
	}
	if s := toYAML(objs); strings.Contains(s, "/var/lib/kubelet") {
		t.Errorf("the rendering still mentions /var/lib/kubelet:\n%s", s)
	}
}

// TestNodePools: a pool gets its own DaemonSet with its kubelet root and node
// selector, and the default DaemonSet stays off its nodes, also when
// node.affinity has terms of its own.
func TestNodePools(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
nodePools:
  - name: k0s
    kubeletDir: /var/lib/k0s/kubelet
    nodeSelector: {pav-cluster.local/kubelet-root: k0s}
  - name: microk8s
    kubeletDir: /var/snap/microk8s/common/var/lib/kubelet
    nodeSelector: {example.com/distro: microk8s}
    resources: {limits: {memory: 512Mi}}
node:
  nodeSelector: {kubernetes.io/os: linux}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: zone, operator: In, values: [a]}]
          - matchExpressions: [{key: zone, operator: In, values: [b]}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "-f", values)
	main := find(t, objs, "DaemonSet", "node-agent")
	terms := get(main, "spec", "template", "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	wantTerms := parse(t, []byte(`
terms:
  - matchExpressions:
      - {key: zone, operator: In, values: [a]}
      - {key: pav-cluster.local/kubelet-root, operator: NotIn, values: [k0s]}
      - {key: example.com/distro, operator: NotIn, values: [microk8s]}
  - matchExpressions:
      - {key: zone, operator: In, values: [b]}
      - {key: pav-cluster.local/kubelet-root, operator: NotIn, values: [k0s]}
      - {key: example.com/distro, operator: NotIn, values: [microk8s]}
`))[0]["terms"]
	if d := cmp.Diff(wantTerms, terms); d != "" {
		t.Errorf("node-agent's required node affinity (-want +got):\n%s", d)
	}
	hasArg(t, main, "--kubelet-dir=/var/lib/kubelet")
	// The controller places capacity pods' /pav under each pool's root.
	ctrl := find(t, objs, "Deployment", "controller-agent")
	hasArg(t, ctrl, "--kubelet-dir=/var/lib/kubelet")
	hasArg(t, ctrl, "--pool-kubelet-dir=pav-cluster.local/kubelet-root=k0s:/var/lib/k0s/kubelet")
	hasArg(t, ctrl, "--pool-kubelet-dir=example.com/distro=microk8s:/var/snap/microk8s/common/var/lib/kubelet")
	for _, p := range []struct{ name, dir, label, value, memory string }{
		{"k0s", "/var/lib/k0s/kubelet", "pav-cluster.local/kubelet-root", "k0s", "256Mi"},
		{"microk8s", "/var/snap/microk8s/common/var/lib/kubelet", "example.com/distro", "microk8s", "512Mi"},
	} {
		ds := find(t, objs, "DaemonSet", "node-agent-"+p.name)
		hasArg(t, ds, "--kubelet-dir="+p.dir)
		if host, mount := kubeletPaths(t, ds); host != p.dir || mount != p.dir {
			t.Errorf("%s's kubelet volume: host path %q, mount path %q; want %s", key(ds), host, mount, p.dir)
		}
		wantSel := map[string]any{p.label: p.value, "kubernetes.io/os": "linux"}
		if d := cmp.Diff(wantSel, get(ds, "spec", "template", "spec", "nodeSelector")); d != "" {
			t.Errorf("%s's nodeSelector (-want +got):\n%s", key(ds), d)
		}
		if sel := str(ds, "spec", "selector", "matchLabels", "pav-node-pool"); sel != p.name {
			t.Errorf("%s's selector has pav-node-pool=%q", key(ds), sel)
		}
		if got := str(container(t, ds), "resources", "limits", "memory"); got != p.memory {
			t.Errorf("%s's memory limit is %q, want %s", key(ds), got, p.memory)
		}
		if d := cmp.Diff(get(main, "spec", "template", "spec", "tolerations"), get(ds, "spec", "template", "spec", "tolerations")); d != "" {
			t.Errorf("%s's tolerations differ from node-agent's:\n%s", key(ds), d)
		}
	}
	if out := renderFails(t, "--set", "nodePools[0].name=k0s"); !strings.Contains(out, "missing properties 'kubeletDir', 'nodeSelector'") {
		t.Errorf("a pool without kubeletDir: %s", out)
	}
	if out := renderFails(t, "--set", "nodePools[0].name=K0S,nodePools[0].kubeletDir=/k,nodePools[0].nodeSelector.a=b"); !strings.Contains(out, "at '/nodePools/0/name': 'K0S' does not match pattern") {
		t.Errorf("a pool named K0S: %s", out)
	}
}

// TestValues: image, replicas, resources, scheduling of each component, log verbosity.
func TestValues(t *testing.T) {
	objs := render(t,
		"--set", "image.repository=registry.example.com/pav,image.tag=v0.2.0,image.pullPolicy=Always",
		"--set", "controller.replicas=3,controller.resources.limits.memory=512Mi",
		"--set", "node.resources.requests.cpu=50m",
		"--set", "controller.nodeSelector.role=infra,controller.tolerations[0].key=infra,controller.tolerations[0].operator=Exists",
		"--set", "controller.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=1",
		"--set", "controller.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=kubernetes.io/hostname",
		"--set", "node.nodeSelector.storage=yes,node.tolerations=null",
		"--set", "logVerbosity=4,logFormat=json",
	)
	ctl := find(t, objs, "Deployment", "controller-agent")
	ds := find(t, objs, "DaemonSet", "node-agent")
	for _, o := range []object{ctl, ds} {
		c := container(t, o)
		if c["image"] != "registry.example.com/pav:v0.2.0" || c["imagePullPolicy"] != "Always" {
			t.Errorf("%s: image %v, pull policy %v", key(o), c["image"], c["imagePullPolicy"])
		}
		hasArg(t, o, "--v=4")
		hasArg(t, o, "--logging-format=json")
	}
	// A digest pins the image (the tag is ignored).
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, o := range render(t, "--set", "image.repository=registry.example.com/pav,image.tag=v0.2.0,image.digest="+digest) {
		if k := str(o, "kind"); k == "Deployment" || k == "DaemonSet" {
			if c := container(t, o); c["image"] != "registry.example.com/pav@"+digest {
				t.Errorf("%s with image.digest: image %v", key(o), c["image"])
			}
		}
	}
	if r := get(ctl, "spec", "replicas"); r != 3.0 {
		t.Errorf("controller replicas: %v", r)
	}
	if m := str(container(t, ctl), "resources", "limits", "memory"); m != "512Mi" {
		t.Errorf("controller memory limit: %q", m)
	}
	if c := str(container(t, ds), "resources", "requests", "cpu"); c != "50m" {
		t.Errorf("node cpu request: %q", c)
	}
	if m := str(container(t, ds), "resources", "limits", "memory"); m != "256Mi" {
		t.Errorf("node memory limit: %q (a value set beside it must keep the default)", m)
	}
	cspec := get(ctl, "spec", "template", "spec").(map[string]any)
	if str(cspec, "nodeSelector", "role") != "infra" || get(cspec, "tolerations") == nil || get(cspec, "affinity", "podAntiAffinity") == nil {
		t.Errorf("controller scheduling:\n%s", toYAML(cspec))
	}
	nspec := get(ds, "spec", "template", "spec").(map[string]any)
	if str(nspec, "nodeSelector", "storage") != "yes" || get(nspec, "tolerations") != nil || get(nspec, "affinity") != nil {
		t.Errorf("node scheduling:\n%s", toYAML(nspec))
	}
}

// TestMetrics: enabled, both processes serve /metrics on all addresses at the
// ports given, the NetworkPolicies let metrics.from in, and Services point at them.
func TestMetrics(t *testing.T) {
	def := render(t)
	for _, n := range []string{"pav-controller-metrics", "pav-node-metrics"} {
		for _, o := range def {
			if str(o, "metadata", "name") == n {
				t.Errorf("metrics disabled (the default), yet %s", key(o))
			}
		}
	}
	objs := render(t, "--set", "metrics.enabled=true,metrics.controllerPort=9190,metrics.from[0].namespaceSelector.matchLabels.name=monitoring")
	for _, c := range []struct{ kind, name, np, svc, port string }{
		{"Deployment", "controller-agent", "controller-agent", "pav-controller-metrics", "9190"},
		{"DaemonSet", "node-agent", "node-agent", "pav-node-metrics", "9091"},
	} {
		o := find(t, objs, c.kind, c.name)
		hasArg(t, o, "--metrics-endpoint=:"+c.port)
		if s := toYAML(container(t, o)["ports"]); !strings.Contains(s, "containerPort: "+c.port+"\n  name: metrics") {
			t.Errorf("%s's ports:\n%s", key(o), s)
		}
		np := toYAML(get(find(t, objs, "NetworkPolicy", c.np), "spec", "ingress"))
		if !strings.Contains(np, "port: "+c.port) || !strings.Contains(np, "name: monitoring") {
			t.Errorf("NetworkPolicy %s's ingress:\n%s", c.np, np)
		}
		svc := find(t, objs, "Service", c.svc)
		if s := toYAML(get(svc, "spec")); !strings.Contains(s, "port: "+c.port) || !strings.Contains(s, "component: "+c.name) {
			t.Errorf("Service %s:\n%s", c.svc, s)
		}
	}
	objs = render(t, "--set", "metrics.enabled=true,metrics.service.enabled=false")
	for _, o := range objs {
		if str(o, "kind") == "Service" && str(o, "metadata", "name") != "pav-webhook" {
			t.Errorf("metrics.service.enabled=false, yet %s", key(o))
		}
	}
}

// TestWebhookAccess: by default, client certificates are required once the
// optional ConfigMap pav-webhook-client-ca exists; controller.webhook.clientAuth
// names another ConfigMap (required, without optional) or turns them off;
// controller.webhook.from, or else podCIDRs, narrows the NetworkPolicy's
// webhook port and nothing else.
func TestWebhookAccess(t *testing.T) {
	d := find(t, render(t), "Deployment", "controller-agent")
	hasArg(t, d, "--webhook-client-ca=/etc/pav/webhook-client-ca/ca.crt")
	hasArg(t, d, "--webhook-client-ca-optional")
	if s := toYAML(get(d, "spec", "template", "spec", "volumes")); !strings.Contains(s, "name: pav-webhook-client-ca\n    optional: true") {
		t.Errorf("volumes by default:\n%s", s)
	}
	for _, a := range args(t, find(t, render(t, "--set", "controller.webhook.clientAuth.caConfigMap="), "Deployment", "controller-agent")) {
		if strings.HasPrefix(a, "--webhook-client") {
			t.Errorf("client authentication off, yet %s", a)
		}
	}
	objs := render(t, "--set", "controller.webhook.clientAuth.caConfigMap=apiserver-ca,controller.webhook.clientAuth.optional=false,controller.webhook.clientAuth.names={apiserver,other}",
		"--set", "controller.webhook.from[0].ipBlock.cidr=10.0.0.0/24")
	d = find(t, objs, "Deployment", "controller-agent")
	for _, a := range args(t, d) {
		if a == "--webhook-client-ca-optional" {
			t.Errorf("clientAuth.optional=false, yet %s", a)
		}
	}
	hasArg(t, d, "--webhook-client-ca=/etc/pav/webhook-client-ca/ca.crt")
	hasArg(t, d, "--webhook-client-names=apiserver,other")
	if s := toYAML(get(d, "spec", "template", "spec", "volumes")); !strings.Contains(s, "name: apiserver-ca") {
		t.Errorf("volumes:\n%s", s)
	}
	if s := toYAML(container(t, d)["volumeMounts"]); !strings.Contains(s, "mountPath: /etc/pav/webhook-client-ca") {
		t.Errorf("volume mounts:\n%s", s)
	}
	want := `- from:
  - ipBlock:
      cidr: 10.0.0.0/24
  ports:
  - port: 9443
    protocol: TCP
- ports:
  - port: 8080
    protocol: TCP
`
	if got := toYAML(get(find(t, objs, "NetworkPolicy", "controller-agent"), "spec", "ingress")); got != want {
		t.Errorf("NetworkPolicy controller-agent's ingress:\n%s\nwant:\n%s", got, want)
	}
	// podCIDRs: every address but the pods'.
	objs = render(t, "--set", "controller.webhook.podCIDRs={10.244.0.0/16,fd00:10:244::/56}")
	want = `- from:
  - ipBlock:
      cidr: 0.0.0.0/0
      except:
      - 10.244.0.0/16
  - ipBlock:
      cidr: ::/0
      except:
      - fd00:10:244::/56
  ports:
  - port: 9443
    protocol: TCP
- ports:
  - port: 8080
    protocol: TCP
`
	if got := toYAML(get(find(t, objs, "NetworkPolicy", "controller-agent"), "spec", "ingress")); got != want {
		t.Errorf("NetworkPolicy controller-agent's ingress with podCIDRs:\n%s\nwant:\n%s", got, want)
	}
}

// TestNamespace: installed in another namespace, every namespaced object, every
// reference to a service account and the webhook's Service follow.
func TestNamespace(t *testing.T) {
	objs := render(t, "--namespace", "storage-system")
	for _, o := range objs {
		switch key(o) {
		case "RoleBinding pav-pod-logs -n default": // in each namespace of pods.namespaces
			continue
		}
		switch str(o, "kind") {
		case "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "CustomResourceDefinition":
		default:
			if ns := str(o, "metadata", "namespace"); ns != "storage-system" {
				t.Errorf("%s: namespace %q", key(o), ns)
			}
		}
	}
	s, _ := json.Marshal(objs)
	for _, bad := range []string{`"namespace":"pav"`, `serviceaccount:pav:`} {
		if bytes.Contains(s, []byte(bad)) {
			t.Errorf("the rendering in namespace storage-system still has %s", bad)
		}
	}
	if !bytes.Contains(s, []byte(`system:serviceaccount:storage-system:controller`)) {
		t.Error("no policy names system:serviceaccount:storage-system:controller")
	}
}

// TestPods: the namespaces and service accounts PaV's pods may use are the
// parameter of policy pav-pod-confinement, and PaV reads pods' logs in each
// namespace listed.
func TestPods(t *testing.T) {
	objs := render(t, "--set", "pods.namespaces={default,storage},pods.serviceAccounts={default,storage/mounter}")
	cm := find(t, objs, "ConfigMap", "pav-pod-confinement")
	if ns, sa := str(cm, "data", "namespaces"), str(cm, "data", "serviceAccounts"); ns != "default storage" || sa != "default storage/mounter" {
		t.Errorf("ConfigMap pav-pod-confinement: namespaces %q, serviceAccounts %q", ns, sa)
	}
	binding := find(t, objs, "ValidatingAdmissionPolicyBinding", "pav-pod-confinement")
	if ref := get(binding, "spec", "paramRef"); str(binding, "spec", "paramRef", "name") != "pav-pod-confinement" || str(binding, "spec", "paramRef", "namespace") != "pav" {
		t.Errorf("ValidatingAdmissionPolicyBinding pav-pod-confinement's paramRef: %v", ref)
	}
	var logs []string
	for _, o := range objs {
		if str(o, "kind") == "RoleBinding" && str(o, "metadata", "name") == "pav-pod-logs" {
			logs = append(logs, str(o, "metadata", "namespace"))
		}
	}
	if strings.Join(logs, " ") != "default storage" {
		t.Errorf("RoleBindings pav-pod-logs in %v, want default and storage", logs)
	}
}
