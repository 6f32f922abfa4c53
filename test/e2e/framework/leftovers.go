package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/mount-utils"

	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
)

// What PaV may leave behind on the host node and in the cluster: the soak's
// audit and the e2e tests that kill PaV's processes check the same things.

// KillPod SIGKILLs every process of a pod's containers (not its sandbox's
// pause process), found by the pod's cgroup: the containers die as on a
// crash, and kubelet restarts them or marks the pod failed, as its restart
// policy says. It tells whether it killed anything.
func KillPod(uid types.UID) (bool, error) {
	pids, err := PodProcesses(uid)
	if err != nil || len(pids) == 0 {
		return false, err
	}
	killed := false
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed = true
		}
	}
	return killed, nil
}

// PodDirs lists the names of PaV's pod directories (each a pod's /pav) on
// the host node.
func PodDirs() (map[string]bool, error) {
	entries, err := os.ReadDir(protocol.PodDirRoot(protocol.DefaultKubeletDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		dirs[e.Name()] = true
	}
	return dirs, nil
}

// PodDirsLeft lists the host node's PaV pod directories that are not in
// baseline (PodDirs before the test), sorted.
func PodDirsLeft(baseline map[string]bool) []string {
	dirs, err := PodDirs()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for d := range dirs {
		if !baseline[d] {
			out = append(out, filepath.Join(protocol.PodDirRoot(protocol.DefaultKubeletDir), d))
		}
	}
	sort.Strings(out)
	return out
}

// MountsUnder lists the host's mount points at or under path, sorted.
func MountsUnder(path string) ([]string, error) {
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range infos {
		if mp := mounts.UnescapeMountInfo(m.MountPoint); mp == path || strings.HasPrefix(mp, path+"/") {
			out = append(out, mp)
		}
	}
	sort.Strings(out)
	return out, nil
}

// MountsLeft lists the host's mounts under the kubelet root that belong to
// one of volumes (PV names: kubelet's target paths name the PV) or to a PaV
// pod directory not in baseline.
func MountsLeft(baseline, volumes map[string]bool) []string {
	mps, err := MountsUnder(protocol.DefaultKubeletDir)
	if err != nil {
		return []string{err.Error()}
	}
	podDirRoot := protocol.PodDirRoot(protocol.DefaultKubeletDir) + "/"
	var out []string
	for _, mp := range mps {
		if rest, ok := strings.CutPrefix(mp, podDirRoot); ok {
			if !baseline[strings.SplitN(rest, "/", 2)[0]] {
				out = append(out, mp)
			}
			continue
		}
		for pv := range volumes {
			if strings.Contains(mp, pv) {
				out = append(out, mp)
				break
			}
		}
	}
	return out
}

// PavPodsLeft lists PaV's pods (in any namespace) of the provisioners ours
// says yes to.
func PavPodsLeft(ctx context.Context, c kubernetes.Interface, ours func(provisioner string) bool) []string {
	list, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: protocol.LabelProvisioner})
	if err != nil {
		return []string{"listing pods: " + err.Error()}
	}
	var out []string
	for _, p := range list.Items {
		if ours(p.Labels[protocol.LabelProvisioner]) {
			out = append(out, fmt.Sprintf("%s/%s (%s, %s)", p.Namespace, p.Name, p.Labels[protocol.LabelPhase], p.Status.Phase))
		}
	}
	return out
}

// PavFinalizers lists the pods, claims and PVs still carrying one of PaV's
// finalizers: of namespace (PVs: those claimed from it), or of the whole
// cluster if namespace is "".
func PavFinalizers(ctx context.Context, c kubernetes.Interface, namespace string) []string {
	var out []string
	check := func(kind string, m metav1.Object) {
		for _, f := range m.GetFinalizers() {
			if protocol.IsReserved(f) {
				out = append(out, fmt.Sprintf("%s %s/%s: %s", kind, m.GetNamespace(), m.GetName(), f))
			}
		}
	}
	if list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			check("pod", &list.Items[i])
		}
	} else {
		out = append(out, "listing pods: "+err.Error())
	}
	if list, err := c.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			check("claim", &list.Items[i])
		}
	} else {
		out = append(out, "listing claims: "+err.Error())
	}
	if list, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
		for i, pv := range list.Items {
			if namespace == "" || (pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == namespace) {
				check("PV", &list.Items[i])
			}
		}
	} else {
		out = append(out, "listing PVs: "+err.Error())
	}
	return out
}
