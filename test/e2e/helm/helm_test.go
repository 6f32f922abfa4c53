//go:build helm

// Package helm installs, upgrades and uninstalls PaV with its Helm chart
// (charts/pav) and the real helm binary on the local cluster, with volumes in
// use: `make test-helm`, which first uninstalls the deployment.yaml install
// (make undeploy), runs this (build tag helm, not e2e: it takes PaV away from
// the other e2e tests) and reinstalls deployment.yaml after (make deploy-only).
// PAV_HELM is the helm binary (hack/ensure-helm.sh).
package helm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/test/e2e/framework"
)

const (
	release     = "pav"
	namespace   = "pav"
	provisioner = "helm-e2e"
	crd         = "pavprovisioners.pav.albertofaria.github.io"
	// the local cluster's nodes with another kubelet root (hack/cluster/lib.sh)
	poolLabel = framework.KubeletRootLabel
	poolValue = "k0s"
	poolRoot  = "/var/lib/k0s/kubelet"
)

// kubectl runs kubectl with manifest as "-" (framework.KubectlManifest),
// for at most 4 minutes.
func kubectl(t *testing.T, manifest string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return framework.KubectlManifest(ctx, manifest, args...)
}

func k(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kq(t *testing.T, args ...string) string {
	t.Helper()
	out, _ := kubectl(t, "", args...)
	return strings.TrimSpace(out)
}

func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	args := []string{"apply", "-f", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	if _, err := kubectl(t, manifest, args...); err != nil {
		t.Fatal(err)
	}
}

// helm runs the helm binary of PAV_HELM against the cluster.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func helmErr(args ...string) (string, error) {
	bin := os.Getenv("PAV_HELM")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", framework.KubeconfigPath())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// nodes returns the cluster's nodes with the default kubelet root and those of
// the pool with another (label poolLabel=poolValue), sorted.
func nodes(t *testing.T) (def, pool []string) {
	for _, line := range strings.Split(kq(t, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.pav-cluster\.local/kubelet-root}{"\n"}{end}`), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[1] == poolValue:
			pool = append(pool, f[0])
		case len(f) >= 1:
			def = append(def, f[0])
		}
	}
	sort.Strings(def)
	sort.Strings(pool)
	return def, pool
}

// rolledOut waits until the workloads of the release are rolled out.
func rolledOut(t *testing.T, pool bool) {
	t.Helper()
	ws := []string{"deployment/controller-agent", "daemonset/node-agent"}
	if pool {
		ws = append(ws, "daemonset/node-agent-"+poolValue)
	}
	for _, w := range ws {
		k(t, "-n", namespace, "rollout", "status", w, "--timeout=180s")
	}
}

// podsOf lists the pods of a component as "name node uid memory-limit kubelet-dir-arg" lines.
func podsOf(t *testing.T, component string) []string {
	out := kq(t, "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/component="+component, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.uid} {.spec.containers[0].resources.limits.memory} {.spec.containers[0].args[2]}{.metadata.deletionTimestamp}{"\n"}{end}`)
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	sort.Strings(lines)
	return lines
}

const provisionerYAML = `apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: helm-e2e
spec:
  provisioningModes: [Dynamic]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
  # a long-running staging pod: the volume lives as long as it runs
  volumeStaging:
    podTemplate:
      spec:
        restartPolicy: Never
        terminationGracePeriodSeconds: 1
        tolerations: [{operator: Exists}]
        containers:
          - name: stage
            image: pav-test:latest
            imagePullPolicy: IfNotPresent
            command: [/bin/sh, -c, "mkdir -p /pav/volume && touch /pav/ready && trap 'exit 0' TERM && while :; do sleep 1; done"]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: helm-e2e
provisioner: helm-e2e
`

func claim(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s
spec:
  storageClassName: helm-e2e
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Mi}}
`, name)
}

// clusterScoped are the cluster-scoped objects of the chart but its CRD, as
// kubectl names them: those of deployment.yaml (the chart's default
// rendering) that have no namespace, but the Namespace and the CRD.
func clusterScoped(t *testing.T) []string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("deployment.yaml: %v", err)
		}
		if o.Kind != "" && o.Metadata.Namespace == "" && o.Kind != "Namespace" && o.Kind != "CustomResourceDefinition" {
			names = append(names, strings.ToLower(o.Kind)+"/"+o.Metadata.Name)
		}
	}
	if len(names) == 0 {
		t.Fatal("deployment.yaml has no cluster-scoped objects")
	}
	return names
}

func TestHelmInstallUpgradeUninstall(t *testing.T) {
	if os.Getenv("PAV_HELM") == "" {
		t.Fatal("PAV_HELM is not set: run `make test-helm`")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sw := framework.NewStopwatch(t)
	checkNotInstalled(t)
	defNodes, poolNodes := nodes(t)
	if len(defNodes) == 0 {
		t.Fatal("no node with the default kubelet root")
	}
	t.Logf("nodes with the default kubelet root: %v; with %s: %v", defNodes, poolRoot, poolNodes)

	// Whatever happens, the release does not outlive the test (make test-helm then
	// reinstalls deployment.yaml).
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := helmErr("status", release, "-n", namespace)
			t.Logf("helm status:\n%s", out)
			t.Logf("namespace %s:\n%s", namespace, kq(t, "-n", namespace, "get", "all,events", "-o", "wide"))
			kq(t, "delete", "pavprovisioner", provisioner, "--ignore-not-found", "--timeout=120s")
			kq(t, "delete", "storageclass", provisioner, "--ignore-not-found")
			if out, err := helmErr("uninstall", release, "-n", namespace, "--ignore-not-found", "--wait", "--timeout=3m"); err != nil {
				t.Logf("helm uninstall: %v\n%s", err, out)
			}
		}
	})

	// ---- install, with the local cluster's other kubelet root as a node pool
	values := installValues(t, len(poolNodes) > 0)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("values:\n%s", values)
	chart := filepath.Join(root, "charts/pav")
	out := helm(t, "install", release, chart, "-n", namespace, "--create-namespace", "-f", valuesFile, "--wait", "--timeout=5m")
	// the chart's NOTES.txt: how to see PaV run, with this release's names
	if want := "kubectl -n " + namespace + " rollout status daemonset/node-agent"; !strings.Contains(out, want) {
		t.Errorf("helm install's notes do not say %q:\n%s", want, out)
	}
	rolledOut(t, len(poolNodes) > 0)
	sw.Lap("helm install")
	if got := kq(t, "get", "crd", crd, "-o", "name"); got == "" {
		t.Fatal("helm install did not create the CRD of charts/pav/crds")
	}
	if owner := kq(t, "-n", namespace, "get", "deployment", "controller-agent", "-o", `jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}`); owner != release {
		t.Fatalf("controller-agent is not the release's (meta.helm.sh/release-name=%q)", owner)
	}
	want := checkNodePlugins(t, defNodes, poolNodes)

	// ---- a provisioner, and a client on a node of each kubelet root using a volume
	apply(t, "", provisionerYAML)
	t.Cleanup(func() { kq(t, "delete", "storageclass", provisioner, "--ignore-not-found") })
	framework.Eventually(t, time.Minute, "PavProvisioner "+provisioner+" to be Ready", func() (bool, string) {
		s := kq(t, "get", "pavprovisioner", provisioner, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return s == "True", "Ready=" + s
	})
	f := framework.New(t)
	ns := f.Namespace
	clientNodes := []string{defNodes[0]}
	if len(poolNodes) > 0 {
		clientNodes = append(clientNodes, poolNodes[0])
	}
	for i, n := range clientNodes {
		c := fmt.Sprintf("data%d", i)
		apply(t, ns, claim(c)+"---\n"+framework.ClientPodManifest("client"+fmt.Sprint(i), c, n, "Always",
			"echo before > /data/file && while :; do sleep 1; done"))
	}
	inPod := func(pod, script string) string {
		t.Helper()
		out, err := kubectl(t, "", "-n", ns, "exec", pod, "--", "sh", "-c", script)
		if err != nil {
			t.Fatalf("in %s: %v", pod, err)
		}
		return strings.TrimSpace(out)
	}
	for i := range clientNodes {
		f.WaitForPod(fmt.Sprintf("client%d", i), 3*time.Minute, framework.PodRunningReady)
		if got := inPod(fmt.Sprintf("client%d", i), "cat /data/file"); got != "before" {
			t.Fatalf("client%d read %q", i, got)
		}
	}
	sw.Lap(fmt.Sprintf("volumes in use on %v", clientNodes))

	// ---- helm upgrade: more controller replicas and new memory limits, which
	// replace every pod of PaV while the volumes are in use
	ctlBefore, nodeBefore := podsOf(t, "controller-agent"), podsOf(t, "node-agent")
	helm(t, "upgrade", release, chart, "-n", namespace, "--reuse-values",
		"--set", "controller.replicas=3,controller.resources.limits.memory=320Mi,node.resources.limits.memory=300Mi",
		"--wait", "--timeout=5m")
	rolledOut(t, len(poolNodes) > 0)
	sw.Lap("helm upgrade")
	if r := kq(t, "-n", namespace, "get", "deployment", "controller-agent", "-o", "jsonpath={.status.readyReplicas}"); r != "3" {
		t.Fatalf("controller-agent has %s ready replicas after the upgrade, want 3", r)
	}
	framework.Eventually(t, 2*time.Minute, "the old pods of PaV to be gone", upgraded(t, append(ctlBefore, nodeBefore...), len(want)))
	t.Logf("PaV's pods after the upgrade (name, node, UID, memory limit, --kubelet-dir):\n%s\n%s",
		strings.Join(podsOf(t, "controller-agent"), "\n"), strings.Join(podsOf(t, "node-agent"), "\n"))

	// ---- the volumes in use still work, and new claims are provisioned and staged
	for i := range clientNodes {
		if got := inPod(fmt.Sprintf("client%d", i), "echo after >> /data/file && cat /data/file"); got != "before\nafter" {
			t.Fatalf("client%d read %q after the upgrade", i, got)
		}
	}
	for i, n := range clientNodes {
		c := fmt.Sprintf("new%d", i)
		apply(t, ns, claim(c)+"---\n"+framework.ClientPodManifest("writer"+fmt.Sprint(i), c, n, "Never",
			"echo new > /data/file && cat /data/file"))
	}
	for i := range clientNodes {
		f.WaitForPod(fmt.Sprintf("writer%d", i), 3*time.Minute, framework.PodSucceeded)
		if got := strings.TrimSpace(f.PodLogs(fmt.Sprintf("writer%d", i), "")); got != "new" {
			t.Fatalf("writer%d read %q", i, got)
		}
	}
	sw.Lap("volumes in use still work; new claims provisioned and used")

	// ---- delete what used PaV, then uninstall the release
	var pvs []string
	for _, pv := range strings.Fields(kq(t, "-n", ns, "get", "pvc", "-o", "jsonpath={.items[*].spec.volumeName}")) {
		pvs = append(pvs, pv)
	}
	k(t, "-n", ns, "delete", "pods", "--all", "--wait=true", "--timeout=120s")
	k(t, "-n", ns, "delete", "pvc", "--all", "--wait=true", "--timeout=120s")
	for _, pv := range pvs {
		k(t, "wait", "--for=delete", "pv/"+pv, "--timeout=120s")
	}
	k(t, "delete", "pavprovisioner", provisioner, "--wait=true", "--timeout=120s")
	k(t, "delete", "storageclass", provisioner)
	framework.Eventually(t, time.Minute, "CSIDriver "+provisioner+" and its registrations to go", func() (bool, string) {
		d := kq(t, "get", "csidriver", provisioner, "--ignore-not-found", "-o", "name")
		r := kq(t, "get", "csinodes", "-o", "jsonpath={.items[*].spec.drivers[*].name}")
		return d == "" && !strings.Contains(r, provisioner), "csidriver " + d + ", CSINode drivers " + r
	})
	sw.Lap("claims and provisioner deleted")

	helm(t, "uninstall", release, "-n", namespace, "--wait", "--timeout=3m")
	framework.Eventually(t, 2*time.Minute, "PaV's pods to go", func() (bool, string) {
		p := kq(t, "-n", namespace, "get", "pods", "-o", "name")
		return p == "", p
	})
	sw.Lap("helm uninstall")
	checkUninstalled(t, sw)
}

// checkNotInstalled fails the test if PaV, or any of its cluster-scoped
// objects, is installed: helm refuses to take over objects it did not make,
// and something else installing PaV meanwhile shows up here.
func checkNotInstalled(t *testing.T) {
	t.Helper()
	if kq(t, "get", "crd", crd, "--ignore-not-found", "-o", "name") != "" || kq(t, "get", "namespace", namespace, "--ignore-not-found", "-o", "name") != "" {
		t.Fatalf("PaV is installed (CRD %s or namespace %s): `make test-helm` uninstalls deployment.yaml first (make undeploy)", crd, namespace)
	}
	for _, o := range clusterScoped(t) {
		if got := kq(t, "get", o, "--ignore-not-found", "-o", "name"); got != "" {
			t.Fatalf("%s exists before helm install: is PaV being installed by someone not holding /tmp/pav-e2e.lock?", got)
		}
	}
}

// installValues are the release's values: the image under test and, if
// there are nodes with the local cluster's other kubelet root, their pool.
func installValues(t *testing.T, pool bool) string {
	t.Helper()
	image := os.Getenv("IMAGE")
	if image == "" {
		image = "pav:latest"
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		t.Fatalf("IMAGE=%s has no tag", image)
	}
	values := fmt.Sprintf("image:\n  repository: %s\n  tag: %q\n  pullPolicy: IfNotPresent\n", image[:i], image[i+1:])
	if pool {
		values += fmt.Sprintf("nodePools:\n  - name: %s\n    kubeletDir: %s\n    nodeSelector: {%s: %s}\n", poolValue, poolRoot, poolLabel, poolValue)
	}
	return values
}

// checkNodePlugins checks that there is one node plugin per node, with the
// node's kubelet root, and returns them as "node --kubelet-dir=...".
func checkNodePlugins(t *testing.T, defNodes, poolNodes []string) []string {
	t.Helper()
	nodePods := func() []string {
		var p []string
		for _, l := range podsOf(t, "node-agent") {
			f := strings.Fields(l)
			p = append(p, f[1]+" "+f[4])
		}
		sort.Strings(p)
		return p
	}
	var want []string
	for _, n := range defNodes {
		want = append(want, n+" --kubelet-dir=/var/lib/kubelet")
	}
	for _, n := range poolNodes {
		want = append(want, n+" --kubelet-dir="+poolRoot)
	}
	sort.Strings(want)
	if got := nodePods(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("node plugins (node, kubelet dir): %v, want %v", got, want)
	}

	return want
}

// upgraded says whether PaV's pods are all new (none of before), with the
// upgrade's memory limits, 3 controllers and nodes node plugins.
func upgraded(t *testing.T, before []string, nodes int) func() (bool, string) {
	return func() (bool, string) {
		ctl, node := podsOf(t, "controller-agent"), podsOf(t, "node-agent")
		old := map[string]bool{}
		for _, l := range before {
			old[strings.Fields(l)[2]] = true
		}
		for _, l := range append(ctl, node...) {
			f := strings.Fields(l)
			if old[f[2]] || len(f) != 5 {
				return false, fmt.Sprintf("controller %v, node %v", ctl, node)
			}
		}
		for _, l := range ctl {
			if strings.Fields(l)[3] != "320Mi" {
				return false, fmt.Sprintf("controller %v", ctl)
			}
		}
		for _, l := range node {
			if strings.Fields(l)[3] != "300Mi" {
				return false, fmt.Sprintf("node %v", node)
			}
		}
		return len(ctl) == 3 && len(node) == nodes, fmt.Sprintf("controller %v, node %v", ctl, node)
	}
}

// checkUninstalled checks that the uninstalled release left only what the
// README says, then deletes that by hand as the README says.
func checkUninstalled(t *testing.T, sw *framework.Stopwatch) {
	t.Helper()
	if out := helm(t, "list", "-n", namespace, "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("helm list after the uninstall: %s", out)
	}
	// What the release made is gone. helm never deletes the namespace it made
	// (--create-namespace) nor the CRD of crds/; in the namespace there remains
	// only what PaV's controller made at run time (its webhook certificate and
	// leader election Lease) and what Kubernetes puts in every namespace.
	left := kq(t, "-n", namespace, "get", "all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,leases", "-o", "name")
	var got []string
	for _, l := range strings.Fields(left) {
		got = append(got, l)
	}
	sort.Strings(got)
	wantLeft := "configmap/kube-root-ca.crt lease.coordination.k8s.io/pav-controller secret/pav-webhook-cert serviceaccount/default"
	if strings.Join(got, " ") != wantLeft {
		t.Errorf("namespace %s after helm uninstall holds %v, want %s", namespace, got, wantLeft)
	}
	for _, o := range clusterScoped(t) {
		if got := kq(t, "get", o, "--ignore-not-found", "-o", "name"); got != "" {
			t.Errorf("%s is left after helm uninstall", got)
		}
	}
	if kq(t, "get", "crd", crd, "--ignore-not-found", "-o", "name") == "" {
		t.Errorf("CRD %s is gone after helm uninstall: helm keeps the CRDs of crds/ (README says so)", crd)
	}
	// as the README says: the CRD and the namespace by hand
	k(t, "delete", "crd", crd, "--wait=true", "--timeout=120s")
	k(t, "delete", "namespace", namespace, "--wait=true", "--timeout=180s")
	sw.Lap("CRD and namespace deleted")
	for _, o := range []string{"crd/" + crd, "namespace/" + namespace} {
		if got := kq(t, "get", o, "--ignore-not-found", "-o", "name"); got != "" {
			t.Errorf("%s is left", got)
		}
	}
	// no pod of PaV's left anywhere (staging pods, the node plugins)
	if p := kq(t, "get", "pods", "-A", "-l", "pav.albertofaria.github.io/provisioner="+provisioner, "-o", "name"); p != "" {
		t.Errorf("pods of %s left: %s", provisioner, p)
	}
}
