//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// snapshotEvery: one lifecycle in snapshotEvery of each shape that takes
// snapshots is a snapshot lifecycle.
const snapshotEvery = 5

// slowAnnotation asks a soak provisioner's snapshot creation pod to take its
// time (testdata/provisioners.yaml), so the snapshot can be deleted while it
// runs.
const slowAnnotation = "soak.pav/slow"

// takesSnapshot says whether lifecycle i takes a snapshot: of the lifecycles
// of a shape that supports it, every snapshotEvery-th, from an offset the
// seed picks, so every such shape gets its share however short the run.
func takesSnapshot(seed uint64, i int, sh shape) bool {
	return sh.Snapshots && (uint64(i/len(shapes))+seed)%snapshotEvery == 0
}

// snapshotFault says whether snapshot lifecycle i (without another fault)
// first has a snapshot deleted while its creation pod runs: about a third.
func snapshotFault(seed uint64, i int) bool {
	r := rngFor(seed, i+1)
	r.Float64() // the lifecycle's fault
	return r.Float64() < 0.33
}

func snapshotName(c *cycle) string { return c.Claim + "-snap" }

// takeSnapshot takes a snapshot of the lifecycle's claim (written, not in
// use) and waits until it is ready. With faultDeleteSnapshotInCreation, a
// first snapshot is deleted while its creation pod runs. stop says the
// lifecycle ended with an outcome.
func (s *soak) takeSnapshot(ctx context.Context, c *cycle) (stop bool, err error) {
	if c.Fault == faultDeleteSnapshotInCreation {
		if err := s.deleteSnapshotInCreation(ctx, c); err != nil {
			return false, err
		}
	}
	t0 := time.Now()
	if err := s.createSnapshot(ctx, c, false); err != nil {
		return false, err
	}
	if _, err := framework.WaitFor(ctx, s.snap.VolumeSnapshots(s.f.Namespace), snapshotName(c), stepBound,
		func(vs *snapshotv1.VolumeSnapshot) (bool, error) { return readyToUse(vs.Status), nil }); err != nil {
		c.Outcome, c.Detail = snapshotNeverReady, fmt.Sprintf("VolumeSnapshot %s: %v", snapshotName(c), err)
		return true, nil
	}
	c.Steps["snapshot"] = time.Since(t0)
	c.Restored = c.Claim + "-restored"
	return false, nil
}

// restoreAndDelete restores the lifecycle's snapshot into a new claim whose
// readers must read the token, then deletes the snapshot and the restored
// claim and waits until they, the snapshot's content and the restored PV are
// gone.
func (s *soak) restoreAndDelete(ctx context.Context, c *cycle) error {
	t0 := time.Now()
	group := snapshotv1.GroupName
	claim, err := s.createClaimFrom(ctx, c, c.Restored, "none", &corev1.TypedLocalObjectReference{
		APIGroup: &group, Kind: "VolumeSnapshot", Name: snapshotName(c)})
	if err != nil {
		return err
	}
	c.RestoredPV = "pvc-" + string(claim.UID)
	s.mu.Lock()
	s.pvs[c.RestoredPV] = true
	s.mu.Unlock()
	if _, err := framework.WaitFor(ctx, s.f.Client.CoreV1().PersistentVolumeClaims(s.f.Namespace), c.Restored, stepBound,
		func(pvc *corev1.PersistentVolumeClaim) (bool, error) {
			return pvc.Status.Phase == corev1.ClaimBound, nil
		}); err != nil {
		return fmt.Errorf("%w: restored claim never bound: %v", errStuck, err)
	}
	if stop, err := s.readClientsSince(ctx, c, c.Restored, "restore", t0); stop || err != nil {
		return err
	}
	if err := s.deleteSnapshot(ctx, c); err != nil {
		return err
	}
	return s.deleteClaim(ctx, c.Restored, c.RestoredPV)
}

// alongside runs main on c and aside on a copy of c at once, then merges
// what aside recorded into c: its steps, retries, and its outcome or error
// where main had none.
func alongside(c *cycle, main, aside func(*cycle) error) error {
	other := *c
	other.Steps = map[string]time.Duration{}
	retries := c.Retries
	done := make(chan error, 1)
	go func() { done <- aside(&other) }()
	err := main(c)
	otherErr := <-done
	for step, d := range other.Steps {
		c.Steps[step] = d
	}
	c.Retries += other.Retries - retries
	c.RestoredPV = other.RestoredPV
	if c.Outcome == "" && other.Outcome != "" {
		c.Outcome, c.Detail = other.Outcome, other.Detail
	}
	if err == nil && c.Outcome == "" {
		err = otherErr
	}
	return err
}

// createSnapshot creates the lifecycle's VolumeSnapshot of its claim; a slow
// one's creation pod takes its time.
func (s *soak) createSnapshot(ctx context.Context, c *cycle, slow bool) error {
	claim := c.Claim
	class := c.Shape.Name
	vs := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotName(c),
			Labels:      map[string]string{"soak.pav/cycle": c.Claim},
			Annotations: map[string]string{slowAnnotation: fmt.Sprint(slow)}},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: &class,
		},
	}
	if err := retryAPI(ctx, func() error {
		_, err := s.snap.VolumeSnapshots(s.f.Namespace).Create(ctx, vs, metav1.CreateOptions{})
		return ignoreAlreadyExists(err)
	}); err != nil {
		return fmt.Errorf("creating VolumeSnapshot %s: %w", vs.Name, err)
	}
	return nil
}

// deleteSnapshotInCreation takes a slow snapshot and deletes it once its
// creation pod exists, then waits until it and its content are gone.
func (s *soak) deleteSnapshotInCreation(ctx context.Context, c *cycle) error {
	if err := s.createSnapshot(ctx, c, true); err != nil {
		return err
	}
	vs, err := framework.WaitFor(ctx, s.snap.VolumeSnapshots(s.f.Namespace), snapshotName(c), stepBound,
		func(vs *snapshotv1.VolumeSnapshot) (bool, error) {
			return vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil, nil
		})
	if err != nil {
		return fmt.Errorf("%w: VolumeSnapshot %s never bound to a content: %v", errStuck, snapshotName(c), err)
	}
	var content *snapshotv1.VolumeSnapshotContent
	if err := retryAPI(ctx, func() error {
		content, err = s.snap.VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("reading VolumeSnapshotContent %s: %w", *vs.Status.BoundVolumeSnapshotContentName, err)
	}
	sel := labels.Set{protocol.LabelSnapshotContentUID: string(content.UID), protocol.LabelPhase: string(protocol.PhaseSnapshotCreation)}
	if err := s.waitForPod(ctx, sel.AsSelector().String()); err != nil {
		return err
	}
	return s.deleteSnapshot(ctx, c)
}

// deleteSnapshot deletes the lifecycle's VolumeSnapshot and waits until it
// and its content are gone.
func (s *soak) deleteSnapshot(ctx context.Context, c *cycle) error {
	snaps := s.snap.VolumeSnapshots(s.f.Namespace)
	name := snapshotName(c)
	var content string
	if err := retryAPI(ctx, func() error {
		vs, err := snaps.Get(ctx, name, metav1.GetOptions{})
		if err == nil && vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
			content = *vs.Status.BoundVolumeSnapshotContentName
		}
		return ignoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("reading VolumeSnapshot %s: %w", name, err)
	}
	if err := retryAPI(ctx, func() error { return ignoreNotFound(snaps.Delete(ctx, name, metav1.DeleteOptions{})) }); err != nil {
		return fmt.Errorf("deleting VolumeSnapshot %s: %w", name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, stepBound)
	defer cancel()
	if err := framework.WaitForDeletion(wctx, snaps, name); err != nil {
		return fmt.Errorf("%w: VolumeSnapshot %s: %v", errStuck, name, err)
	}
	if content != "" {
		if err := framework.WaitForDeletion(wctx, s.snap.VolumeSnapshotContents(), content); err != nil {
			return fmt.Errorf("%w: VolumeSnapshotContent %s: %v", errStuck, content, err)
		}
	}
	return nil
}

// leftSnapshots lists the VolumeSnapshots in the soak's namespace and the
// VolumeSnapshotContents of the soak's provisioners.
func (s *soak) leftSnapshots(ctx context.Context) (snapshots, contents []string) {
	if list, err := s.snap.VolumeSnapshots(s.f.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, vs := range list.Items {
			snapshots = append(snapshots, fmt.Sprintf("%s (ready %v, error %s)", vs.Name, readyToUse(vs.Status), snapshotError(vs.Status)))
		}
	} else {
		snapshots = append(snapshots, "listing VolumeSnapshots: "+err.Error())
	}
	if list, err := s.snap.VolumeSnapshotContents().List(ctx, metav1.ListOptions{}); err == nil {
		for _, vsc := range list.Items {
			if s.isSoakDriver(vsc.Spec.Driver) {
				contents = append(contents, fmt.Sprintf("%s (%s, snapshot %s/%s, finalizers %v)", vsc.Name, vsc.Spec.Driver,
					vsc.Spec.VolumeSnapshotRef.Namespace, vsc.Spec.VolumeSnapshotRef.Name, vsc.Finalizers))
			}
		}
	} else {
		contents = append(contents, "listing VolumeSnapshotContents: "+err.Error())
	}
	return snapshots, contents
}

func readyToUse(st *snapshotv1.VolumeSnapshotStatus) bool {
	return st != nil && st.ReadyToUse != nil && *st.ReadyToUse
}

func snapshotError(st *snapshotv1.VolumeSnapshotStatus) string {
	if st == nil || st.Error == nil || st.Error.Message == nil {
		return "none"
	}
	return *st.Error.Message
}

// leftSnapshotCopies lists the snapshot copies (and half-made ones) the
// provisioners' snapshot pods left under the soak root.
func leftSnapshotCopies() []string {
	var out []string
	for _, sh := range shapes {
		if !sh.Snapshots {
			continue
		}
		dir := filepath.Join(soakRoot, "snapshots", sh.Name)
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			out = append(out, err.Error())
		}
		for _, e := range entries {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
