//go:build e2e

package examples

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/albertofaria/pav/test/e2e/framework"
)

const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// TestHelloWorldUnderPodSecurity runs hello-world as the README's Pod
// Security section says to: PaV's pods in a namespace labelled
// enforce=privileged, where a client writes and reads the volume, and a
// client in a tenant's namespace enforcing restricted, which reads it. It
// also checks why the stricter levels are not recommended for PaV's pods: a
// namespace enforcing baseline refuses the staging pod (its hostPath /pav),
// and the client's FailedMount Event says so.
func TestHelloWorldUnderPodSecurity(t *testing.T) {
	sw := framework.NewStopwatch(t)
	// hello-world, its staging pods in the namespace its StorageClass names.
	const name = "hello-world-psa"
	provisioner := readFile(t, example("hello-world", "provisioner.yaml"))
	for old, repl := range map[string]string{
		"  name: hello-world\n":           "  name: " + name + "\n",
		"    podTemplate:\n      spec:\n": "    podTemplate:\n      metadata:\n        namespace: \"{{ params.podNamespace }}\"\n      spec:\n",
	} {
		if !strings.Contains(provisioner, old) {
			t.Fatalf("examples/hello-world/provisioner.yaml no longer has %q", old)
		}
		provisioner = strings.Replace(provisioner, old, repl, 1)
	}
	file := filepath.Join(t.TempDir(), "provisioner.yaml")
	if err := os.WriteFile(file, []byte(provisioner), 0o644); err != nil {
		t.Fatal(err)
	}
	installProvisioner(t, file, name)
	// The namespaces after the provisioner: their cleanup (volumes deleted)
	// runs before the provisioner's.
	pavPods := newNamespace(t)  // where PaV's pods run (allowed by label)
	tenant := newNamespace(t)   // client pods only
	baseline := newNamespace(t) // the level the README once recommended
	k(t, "label", "namespace", pavPods, podSecurityEnforce+"=privileged")
	k(t, "label", "namespace", tenant, podSecurityEnforce+"=restricted")
	k(t, "label", "namespace", baseline, podSecurityEnforce+"=baseline")

	class := func(ns string) string { return name + "-" + ns }
	for _, ns := range []string{pavPods, baseline} {
		applyStdin(t, ns, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: %s
parameters: {greeting: Hello world!, podNamespace: %s}
`, class(ns), name, ns))
		deleteAtEnd(t, "storageclass", class(ns))
	}
	sw.Lap("provisioner Ready")

	// A client beside PaV's pods writes the volume and reads it back.
	applyStdin(t, pavPods, psaClaim(class(pavPods), "ReadWriteOnce", "writer",
		`echo written > /data/note && cat /data/note /data/greeting`, "", ""))
	out := waitPodDone(t, pavPods, "writer", clientTimeout)
	mustContain(t, out, "written")
	mustContain(t, out, "Hello world!")
	sw.Lap("privileged namespace: client wrote and read")

	// A restricted client in the tenant's namespace, its staging pod in pavPods.
	applyStdin(t, tenant, psaClaim(class(pavPods), "ReadOnlyMany", "reader", `cat /data/greeting`, `  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile: {type: RuntimeDefault}
`, `      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {drop: [ALL]}
`))
	mustContain(t, waitPodDone(t, tenant, "reader", clientTimeout), "Hello world!")
	sw.Lap("restricted tenant namespace: client read")

	// Staging pods in a baseline namespace are refused: the client's
	// FailedMount Event carries Pod Security's refusal.
	applyStdin(t, baseline, psaClaim(class(baseline), "ReadWriteOnce", "refused", `cat /data/greeting`, "", ""))
	framework.Eventually(t, clientTimeout, "a FailedMount Event refusing the staging pod under baseline", func() (bool, string) {
		ev := kq("-n", baseline, "get", "events", "--field-selector", "involvedObject.name=refused,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(ev, `violates PodSecurity "baseline`) && strings.Contains(ev, "hostPath"), ev
	})
	sw.Lap("baseline namespace: staging pod refused")

	for _, ns := range []string{pavPods, tenant, baseline} {
		k(t, "-n", ns, "delete", "pod", "--all", "--wait=true")
	}
	noPavPodsLeft(t, name)
	sw.Lap("clients gone, volumes unstaged")
	// Delete the three namespaces at once; their cleanups then only wait.
	k(t, "delete", "namespace", pavPods, tenant, baseline, "--wait=false")
}

// psaClaim is a claim of class with accessMode, then a busybox client pod
// running script with it at /data; podSecurity is the pod's and its
// container's securityContext lines, as the namespace's level needs.
func psaClaim(class, accessMode, pod, script, podSecurity, containerSecurity string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  storageClassName: %s
  accessModes: [%s]
  resources: {requests: {storage: 1Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
%s  containers:
    - name: client
      image: busybox:latest
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, %q]
%s      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: data}
`, class, accessMode, pod, podSecurity, script, containerSecurity)
}
