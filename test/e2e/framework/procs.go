package framework

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// PodProcesses lists the processes of a pod's containers on this machine (not
// its sandbox's pause process), found by their cgroup (kubelet's cgroupfs
// driver: .../pod<uid>/<container>). Only the host node's pods and those of
// nodes whose processes this machine sees (every node of the local cluster)
// are found; it needs root to read other users' processes.
func PodProcesses(uid types.UID) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	marker := []byte("/pod" + string(uid) + "/")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !bytes.Contains(cg, marker) {
			continue
		}
		if comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); strings.TrimSpace(string(comm)) == "pause" {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
