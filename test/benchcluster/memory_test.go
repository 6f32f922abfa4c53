//go:build benchcluster

package benchcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// PaV's install (deployment.yaml).
const (
	pavNamespace   = framework.PavNamespace
	leaderLease    = "pav-controller"
	controllerPods = "app.kubernetes.io/component=controller-agent"
	nodePluginPods = framework.NodePluginPods
)

// memory of one container at one moment, MiB.
type memory struct {
	// VmRSS summed over the container's processes (/proc/PID/status).
	VmRSS float64 `json:"vmrss_mib"`
	// RssFile, the part of VmRSS that is mapped files: for PaV its binary's
	// pages, page cache shared by every process mapping it (and counted in
	// the VmRSS of each), not memory of the process's own.
	RssFile float64 `json:"rssfile_mib"`
	// WorkingSet as kubelet (cAdvisor) reports it: the container cgroup's usage
	// minus its inactive file pages.
	WorkingSet float64 `json:"working_set_mib"`
}

// memory measures, in the given state, the processes of systems: PaV's
// and the CSI anchor's (if deployed); both if none is given.
func (b *bench) memory(state string, systems ...string) []memRow {
	b.t.Helper()
	var rows []memRow
	if len(systems) == 0 || slices.Contains(systems, pav) {
		procs, err := pavProcesses(b.f.Ctx, b.f, b.node)
		b.must(err)
		for _, p := range procs {
			m, err := podMemory(p.Pod)
			b.must(err)
			rows = append(rows, memRow{System: pav, Process: p.Role, State: state, memory: m})
		}
	}
	if a := b.anchor; a != nil && (len(systems) == 0 || slices.Contains(systems, csiAnchor)) {
		for _, role := range slices.Sorted(maps.Keys(a.pods)) {
			pod, err := a.c.CoreV1().Pods(a.ns).Get(b.f.Ctx, a.pods[role], metav1.GetOptions{})
			b.must(err)
			m, err := podMemory(pod)
			b.must(err)
			rows = append(rows, memRow{System: csiAnchor, Process: "CSI anchor " + role, State: state, memory: m})
		}
	}
	for _, r := range rows {
		fmt.Printf("memory, %-20s %-55s working set %5.1f MiB, VmRSS %5.1f MiB (files %4.1f)\n", state+":", r.Process, r.WorkingSet, r.VmRSS, r.RssFile)
	}
	return rows
}

// A pavProcess is one of PaV's pods the benchmark measures.
type pavProcess struct {
	Role string // "controller (leader)", "controller (standby)", "node plugin"
	Pod  *corev1.Pod
}

// pavProcesses finds the leading and the standby controller and the node
// plugin of node.
func pavProcesses(ctx context.Context, f *framework.Framework, node string) ([]pavProcess, error) {
	lease, err := f.Client.CoordinationV1().Leases(pavNamespace).Get(ctx, leaderLease, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the controller's lease: %w", err)
	}
	leader := ""
	if lease.Spec.HolderIdentity != nil {
		leader, _, _ = strings.Cut(*lease.Spec.HolderIdentity, "_")
	}
	ctrl, err := f.Client.CoreV1().Pods(pavNamespace).List(ctx, metav1.ListOptions{LabelSelector: controllerPods, FieldSelector: "status.phase=Running"})
	if err != nil {
		return nil, fmt.Errorf("listing PaV's controller pods: %w", err)
	}
	var procs []pavProcess
	for i := range ctrl.Items {
		role := "controller (standby)"
		if ctrl.Items[i].Name == leader {
			role = "controller (leader)"
		}
		procs = append(procs, pavProcess{role, &ctrl.Items[i]})
	}
	slices.SortFunc(procs, func(a, b pavProcess) int { return strings.Compare(a.Role, b.Role) }) // leader first
	nodes, err := f.Client.CoreV1().Pods(pavNamespace).List(ctx, metav1.ListOptions{LabelSelector: nodePluginPods, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(nodes.Items) != 1 {
		return nil, fmt.Errorf("finding PaV's node plugin on %s: %d pods, %v", node, len(nodes.Items), err)
	}
	procs = append(procs, pavProcess{"node plugin", &nodes.Items[0]})
	return procs, nil
}

// podMemory measures the containers of a pod running on this machine.
func podMemory(pod *corev1.Pod) (memory, error) {
	pids, err := framework.PodProcesses(pod.UID)
	if err != nil {
		return memory{}, err
	}
	if len(pids) == 0 {
		return memory{}, fmt.Errorf("no process of pod %s/%s on this machine", pod.Namespace, pod.Name)
	}
	var m memory
	cgroups := map[string]bool{}
	for _, pid := range pids {
		rss, files, err := vmRSS(pid)
		if err != nil {
			return memory{}, err
		}
		m.VmRSS += rss
		m.RssFile += files
		cg, err := memoryCgroup(pid)
		if err != nil {
			return memory{}, err
		}
		if !cgroups[cg] {
			cgroups[cg] = true
			ws, err := workingSet(cg)
			if err != nil {
				return memory{}, err
			}
			m.WorkingSet += ws
		}
	}
	return m, nil
}

const mib = 1 << 20

// vmRSS is a process's VmRSS and its RssFile, in MiB.
func vmRSS(pid int) (rss, files float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		key, v, _ := strings.Cut(line, ":")
		var into *float64
		switch key {
		case "VmRSS":
			into = &rss
		case "RssFile":
			into = &files
		default:
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %q: %w", pid, line, err)
		}
		*into = kb / 1024
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/%d/status lacks VmRSS or RssFile", pid)
	}
	return rss, files, nil
}

// memoryCgroup is the directory of a process's memory cgroup: cgroup v1's
// memory hierarchy if it is mounted (as on this machine), else the v2 one.
func memoryCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	v2 := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	if v2 == "" {
		return "", fmt.Errorf("process %d has no memory cgroup", pid)
	}
	return v2, nil
}

// workingSet is what kubelet reports as a container's working set, in MiB:
// usage (v1 memory.usage_in_bytes, v2 memory.current) minus inactive file
// pages (v1 total_inactive_file, v2 inactive_file of memory.stat).
func workingSet(dir string) (float64, error) {
	usageFile, inactiveKey := "memory.current", "inactive_file"
	if _, err := os.Stat(filepath.Join(dir, "memory.usage_in_bytes")); err == nil {
		usageFile, inactiveKey = "memory.usage_in_bytes", "total_inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", dir, usageFile, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(stat))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), inactiveKey+" "); ok {
			inactive, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s/memory.stat: %q: %w", dir, s.Text(), err)
			}
			return max(usage-inactive, 0) / mib, nil
		}
	}
	return 0, fmt.Errorf("%s/memory.stat has no %s", dir, inactiveKey)
}
