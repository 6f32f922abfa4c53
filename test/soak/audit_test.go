//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// auditLine is one figure of the audit; every line but the lifecycle counts
// must be 0. What names what was found, for the failure message.
type auditLine struct {
	Name  string
	Count int
	What  []string
}

type audit struct {
	Lines []auditLine
}

func (a *audit) add(name string, what []string) {
	a.Lines = append(a.Lines, auditLine{Name: name, Count: len(what), What: what})
}

// problems are the non-zero lines, with what leaked.
func (a *audit) problems() []string {
	var out []string
	for _, l := range a.Lines {
		if l.Count > 0 {
			what := l.What
			if len(what) > 20 {
				what = append(what[:20:20], fmt.Sprintf("and %d more", len(l.What)-20))
			}
			out = append(out, fmt.Sprintf("%s: %d\n\t%s", l.Name, l.Count, strings.Join(what, "\n\t")))
		}
	}
	return out
}

// settleBound is how long the audit waits, after the last lifecycle, for PaV
// and kubelet to finish what they still had to do before it counts what is
// left: pods being deleted, a deletion pod retried, a volume kubelet still
// unstages. Kubelet retries a failed NodeUnstageVolume (the node plugin was
// killed during it) with a backoff of up to 2 min 2 s.
const settleBound = 3 * time.Minute

// waitPavHealthy waits until PaV's controller and node plugins run again
// after the last fault, so the audit judges PaV, not a component restarting;
// it returns those that did not.
func (s *soak) waitPavHealthy() []string {
	ctx, cancel := context.WithTimeout(s.f.Ctx, 5*time.Minute)
	defer cancel()
	var down []string
	for _, what := range []string{"deployment/controller-agent", "daemonset/node-agent"} {
		if out, err := framework.Kubectl(ctx, "-n", pavNamespace, "rollout", "status", what, "--timeout=290s"); err != nil {
			down = append(down, fmt.Sprintf("%s: %v: %s", what, err, strings.TrimSpace(out)))
		}
	}
	return down
}

func (s *soak) audit(cycles []*cycle) *audit {
	ctx := s.f.Ctx
	a := &audit{}
	a.add("PaV components not running again after the faults", s.waitPavHealthy())
	var lost, neverReady, stuckClaims, failedCycles, ioErrors, notRecovered []string
	for _, c := range cycles {
		desc := fmt.Sprintf("lifecycle %d (%s, claim %s, fault %q): %s", c.ID, c.Shape.Name, c.Claim, c.Fault, c.Detail)
		switch c.Outcome {
		case dataLost:
			lost = append(lost, desc)
		case snapshotNeverReady:
			neverReady = append(neverReady, desc)
		case stuck:
			stuckClaims = append(stuckClaims, desc)
		case failed:
			failedCycles = append(failedCycles, desc)
		case ioErrorAfterRecovery:
			ioErrors = append(ioErrors, desc)
		}
		if c.Fault == faultKillStagingDaemon && c.Outcome != stuck && !c.Recovered {
			notRecovered = append(notRecovered, desc)
		}
	}
	a.add("tokens lost (data loss; a restored claim's included)", lost)
	a.add(fmt.Sprintf("snapshots not ready within %v", stepBound), neverReady)
	a.add(fmt.Sprintf("claims stuck longer than %v in a step", stepBound), stuckClaims)
	a.add("lifecycles failed otherwise", failedCycles)
	a.add("client I/O errors after a staging daemon's recovery", ioErrors)
	a.add("killed staging daemons not recovered", notRecovered)

	// Let PaV and kubelet finish; then count.
	var left leftovers
	deadline := time.Now().Add(settleBound)
	for {
		left = s.leftovers(ctx)
		if left.none() || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	a.add("PersistentVolumes left", left.pvs)
	a.add("claims left", left.claims)
	a.add("PaV pods left", left.pods)
	a.add("PaV finalizers left", append(framework.PavFinalizers(ctx, s.f.Client, ""), s.uninstall()...))
	a.add("mounts left under the kubelet root", left.mounts)
	a.add("/pav pod directories left", left.podDirs)
	a.add("loop devices left", left.loops)
	a.add("VolumeSnapshots left", left.snapshots)
	a.add("VolumeSnapshotContents left", left.contents)
	a.add("snapshot copies left on the host", left.copies)
	a.add("backend volumes never deleted (ledger)", leakedDeletions())
	return a
}

// leftovers is what the soak's volumes may leave behind, in the cluster and
// on the host node.
type leftovers struct {
	pvs, claims, pods, mounts, podDirs, loops []string
	snapshots, contents, copies               []string
}

func (s *soak) leftovers(ctx context.Context) leftovers {
	var l leftovers
	l.pvs, l.claims, l.pods = s.leftObjects(ctx)
	l.mounts, l.podDirs, l.loops = framework.MountsLeft(s.baseline, s.pvs), framework.PodDirsLeft(s.baseline), leftLoopDevices()
	l.snapshots, l.contents = s.leftSnapshots(ctx)
	l.copies = leftSnapshotCopies()
	return l
}

func (l leftovers) none() bool {
	return len(l.pvs)+len(l.claims)+len(l.pods)+len(l.mounts)+len(l.podDirs)+len(l.loops)+
		len(l.snapshots)+len(l.contents)+len(l.copies) == 0
}

func (s *soak) isSoakDriver(name string) bool {
	for _, sh := range shapes {
		if sh.Name == name {
			return true
		}
	}
	return false
}

// leftObjects lists the soak provisioners' PVs, the soak's claims and PaV's
// pods for the soak provisioners, in any namespace.
func (s *soak) leftObjects(ctx context.Context) (pvs, claims, pods []string) {
	if list, err := s.f.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, pv := range list.Items {
			if pv.Spec.CSI != nil && s.isSoakDriver(pv.Spec.CSI.Driver) {
				pvs = append(pvs, fmt.Sprintf("%s (%s, %s)", pv.Name, pv.Spec.CSI.Driver, pv.Status.Phase))
			}
		}
	} else {
		pvs = append(pvs, "listing PVs: "+err.Error())
	}
	if list, err := s.f.Client.CoreV1().PersistentVolumeClaims(s.f.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			claims = append(claims, fmt.Sprintf("%s (%s)", c.Name, c.Status.Phase))
		}
	} else {
		claims = append(claims, "listing claims: "+err.Error())
	}
	pods = framework.PavPodsLeft(ctx, s.f.Client, s.isSoakDriver)
	return pvs, claims, pods
}

// uninstall deletes the soak's StorageClasses, VolumeSnapshotClasses and
// PavProvisioners and returns the provisioners that are still there a minute
// later (PaV keeps its finalizer on a provisioner while it has volumes).
func (s *soak) uninstall() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var left []string
	for _, sh := range shapes {
		_ = s.f.Client.StorageV1().StorageClasses().Delete(ctx, sh.Name, metav1.DeleteOptions{})
		if sh.Snapshots {
			_ = s.snap.VolumeSnapshotClasses().Delete(ctx, sh.Name, metav1.DeleteOptions{})
		}
		if err := s.pav.Delete(ctx, sh.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("PavProvisioner %s: deleting: %v", sh.Name, err))
		}
	}
	for _, sh := range shapes {
		if err := framework.WaitForDeletion(ctx, s.pav, sh.Name); err != nil {
			p, _ := s.pav.Get(context.Background(), sh.Name, metav1.GetOptions{})
			left = append(left, fmt.Sprintf("PavProvisioner %s still there a minute after deletion, finalizers %v", sh.Name, p.GetFinalizers()))
		}
	}
	return left
}

// leftLoopDevices lists loop devices still attached to a soak-block volume.
func leftLoopDevices() []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), "/soak-block/") {
			out = append(out, fmt.Sprintf("%s → %s", strings.Split(f, "/")[3], strings.TrimSpace(string(b))))
		}
	}
	return out
}

// leakedDeletions reads the provisioners' ledger: a volume whose last entry
// is a creation was never deleted, though its claim is gone.
func leakedDeletions() []string {
	var out []string
	for _, sh := range shapes {
		if !sh.CreationPod {
			continue
		}
		dir := filepath.Join(soakRoot, "ledger", sh.Name)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			lines := strings.Fields(string(b))
			if len(lines) > 0 && lines[len(lines)-1] == "create" {
				out = append(out, fmt.Sprintf("%s volume %s (ledger: %s)", sh.Name, e.Name(), strings.Join(lines, ", ")))
			}
		}
	}
	return out
}
