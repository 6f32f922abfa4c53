//go:build e2e || e2e_slow

package examples

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Clients that write a numbered, fsync'ed line (or sector) every 0.2 s, and
// what the recovery tests check with them.

// writerPod is a client that appends a numbered line to /data/<file> every
// 0.2 s, each synced to the volume, and logs "ok N" once line N was, "err N"
// if it was not; it never exits. propagation is its volumeMount's
// mountPropagation ("" for none: the mount is private to its container).
func writerPod(name, claim, file, propagation string) string {
	prop := ""
	if propagation != "" {
		prop = "\n          mountPropagation: " + propagation
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 0
  containers:
    - name: writer
      image: pav-test:latest
      imagePullPolicy: IfNotPresent
      command:
        - /bin/bash
        - -c
        - |
          i=0
          while :; do
            i=$((i+1))
            if (echo "line $i" >> /data/%s && sync /data/%s) 2> /dev/null; then echo "ok $i"; else echo "err $i"; fi
            sleep 0.2
          done
      volumeMounts:
        - name: data
          mountPath: /data%s
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: %s
`, name, file, file, prop, claim)
}

// acknowledged returns the numbers of the lines a writerPod logged "ok".
func acknowledged(t *testing.T, ns, pod string) []int {
	t.Helper()
	var ok []int
	for _, line := range strings.Split(kq("-n", ns, "logs", pod), "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "ok %d", &n); err == nil {
			ok = append(ok, n)
		}
	}
	return ok
}

// checkAcknowledged reports each line a writer acknowledged that its file's
// content (read where) lacks.
func checkAcknowledged(t *testing.T, writer string, acked []int, content, where string) {
	t.Helper()
	lines := map[string]bool{}
	for _, line := range strings.Split(content, "\n") {
		lines[line] = true
	}
	for _, n := range acked {
		if !lines[fmt.Sprintf("line %d", n)] {
			t.Errorf("%s: line %d was acknowledged but is not %s", writer, n, where)
		}
	}
}

// startWriters creates two writerPods of claim in ns, one whose mount is
// private to its container and one with mountPropagation HostToContainer,
// waits until both write, and returns each writer's container ID.
func startWriters(t *testing.T, ns, claim string) (containerIDs map[string]string) {
	t.Helper()
	propagation := map[string]string{"writer-private": "", "writer-hosttocontainer": "HostToContainer"}
	for name, prop := range propagation {
		applyStdin(t, ns, writerPod(name, claim, name+".log", prop))
	}
	containerIDs = map[string]string{}
	for name := range propagation {
		waitPodReady(t, ns, name)
		eventually(t, time.Minute, name+" to write", func() (bool, string) {
			ok := acknowledged(t, ns, name)
			return len(ok) >= 5, fmt.Sprintf("%d lines acknowledged", len(ok))
		})
		containerIDs[name] = kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}")
	}
	return containerIDs
}

// killDaemonsAndWaitRecovered kills the processes named comm in every
// staging pod of provisioner, one per writer, then waits until each writer
// got VolumeLost and VolumeRecovered and writes again in the same container
// (same container ID, no restart).
func killDaemonsAndWaitRecovered(t *testing.T, ns string, writers map[string]string, provisioner, comm string) {
	t.Helper()
	stagings := strings.Fields(kq("get", "pods", "-A", "-l", "pav.albertofaria.github.io/phase=staging,pav.albertofaria.github.io/provisioner="+provisioner,
		"-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`))
	if len(stagings) != len(writers) {
		t.Fatalf("staging pods %v, want one per client", stagings)
	}
	for _, staging := range stagings {
		nsName := strings.SplitN(staging, "/", 2)
		k(t, "-n", nsName[0], "exec", nsName[1], "--", "bash", "-c",
			`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = `+comm+` ] && kill -9 "${p#/proc/}"; done; true`)
	}
	killed := map[string]int{}
	for name := range writers {
		ok := acknowledged(t, ns, name)
		killed[name] = ok[len(ok)-1]
	}
	for name := range writers {
		eventually(t, 3*time.Minute, "VolumeLost and VolumeRecovered Events on "+name, func() (bool, string) {
			out := kq("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+name, "-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)
			return strings.Contains(out, "VolumeLost") && strings.Contains(out, "VolumeRecovered"), out
		})
		eventually(t, time.Minute, name+" to write again", func() (bool, string) {
			ok := acknowledged(t, ns, name)
			return ok[len(ok)-1] > killed[name]+5, fmt.Sprintf("last acknowledged line %d, %d at the kill", ok[len(ok)-1], killed[name])
		})
		if id := kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].containerID}"); id != writers[name] {
			t.Errorf("%s: container %s replaced by %s", name, writers[name], id)
		}
		if n := kq("-n", ns, "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].restartCount}"); n != "0" {
			t.Errorf("%s: restarted %s times", name, n)
		}
	}
}
