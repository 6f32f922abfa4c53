//go:build e2e

package staging

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// TestSharedStaging: ten client pods of one ReadWriteMany claim on one node
// are served by one staging pod (each sees what the others wrote); deleting
// nine keeps it; deleting the tenth runs the unstaging pod once.
func TestSharedStaging(t *testing.T) {
	staging := podTemplate("stage", `mkdir -p /pav/volume
mount -t tmpfs -o size=1m tmpfs /pav/volume
echo staged >> /marker/stagings
trap 'umount /pav/volume; exit 0' TERM
touch /pav/ready
sleep 3600 & wait`, true)
	unstaging := podTemplate("unstage", "echo unstaged >> /marker/unstagings", false)
	spec := "provisioningModes: [Dynamic]\nvolumeCreation:\n  capacity: 1Mi\n" +
		"volumeStaging:\n  shared: true\n" + indent(staging, "  ") + section("volumeUnstaging", unstaging)
	e := newEnv(t, spec)
	e.storageClass(nil)
	e.claim("c1", corev1.PersistentVolumeFilesystem, corev1.ReadWriteMany)

	const clients = 10
	for i := range clients {
		name := fmt.Sprintf("client-%d", i)
		e.CreatePod(framework.PinToNode(clientPodObject(name, "echo "+name+" > /data/c1/"+name+"; sleep 3600", []string{"c1"}, false, false), e.nodeName()))
	}
	for i := range clients {
		e.WaitForPod(fmt.Sprintf("client-%d", i), timeout, framework.PodRunningReady)
	}
	if n := e.stagingPods(); n != 1 {
		t.Fatalf("%d staging pods for %d clients of one claim on one node, want 1", n, clients)
	}
	// Every client sees every client's file: one volume.
	out := e.exec("client-0", "sh", "-c", "ls /data/c1 | wc -l")
	if strings.TrimSpace(out) != fmt.Sprint(clients) {
		t.Errorf("client-0 sees %s files in the shared volume, want %d", strings.TrimSpace(out), clients)
	}
	for i := 1; i < clients; i++ {
		e.DeletePod(fmt.Sprintf("client-%d", i), timeout)
	}
	if n := e.stagingPods(); n != 1 {
		t.Fatalf("%d staging pods with one client left, want 1", n)
	}
	if out := e.exec("client-0", "cat", "/data/c1/client-0"); strings.TrimSpace(out) != "client-0" {
		t.Errorf("the last client reads %q from its volume", out)
	}
	if lines := e.markerLines("unstagings"); lines != 0 {
		t.Fatalf("the unstaging pod ran %d times while a client was left", lines)
	}
	e.DeletePod("client-0", timeout)
	if !e.marked("unstagings") {
		t.Fatal("the unstaging pod did not run after the last client")
	}
	if lines := e.markerLines("unstagings"); lines != 1 {
		t.Errorf("the unstaging pod ran %d times, want once", lines)
	}
	if lines := e.markerLines("stagings"); lines != 1 {
		t.Errorf("the staging pod ran %d times, want once", lines)
	}
}

// stagingPods counts the provisioner's staging pods that are not being deleted.
func (e *env) stagingPods() int {
	e.t.Helper()
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{
		LabelSelector: "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner=" + e.prov})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}
