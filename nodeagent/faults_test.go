package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient/fakeapi"
	"github.com/albertofaria/pav/nodeagent/collector"
	"github.com/albertofaria/pav/protocol"
)

// The node plugin's records are its pods (their finalizers and
// annotations) and their host directories: a node plugin that dies, or an
// API server that fails a write, at any write must leave them so that
// kubelet's retries, or a restarted node plugin, end where a clean run ends,
// with nothing leaked and no pod's work done twice. As the controller's
// sync_test.go, each scenario runs cleanly once, then once per write of the
// clean run and per fault.

// kubeletManager names the updates the test makes as kubelet and the
// collector, which are not the node plugin's writes.
const kubeletManager = "test-kubelet"

// isNodeWrite says whether a is a write of the node plugin: not a read, not
// a status written by the test as kubelet, not an Event.
func isNodeWrite(a k8stesting.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete":
	default:
		return false
	}
	if a.GetSubresource() != "" || a.GetResource().Resource == "events" {
		return false
	}
	if u, ok := a.(k8stesting.UpdateActionImpl); ok && u.UpdateOptions.FieldManager == kubeletManager {
		return false
	}
	return true
}

// playKubelet runs every PaV pod to completion, as kubelet and the
// collector would, until ctx ends: a staging pod exposes /pav/volume and
// exits 0 (run to completion), or with longRunning creates /pav/ready and
// runs until it is deleted; a creation pod reports a capacity.
func (f *stagerFixture) playKubelet(ctx context.Context, longRunning bool) {
	for ctx.Err() == nil {
		list, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range list.Items {
			pod := &list.Items[i]
			dir, err := protocol.PodHostDir(pod, f.root)
			if protocol.Terminated(pod) || err != nil {
				continue
			}
			exit := int32(0)
			staging := protocol.Phase(pod.Labels[protocol.LabelPhase]) == protocol.PhaseStaging
			switch {
			case pod.DeletionTimestamp != nil && !(staging && longRunning):
				continue // runs to completion
			case pod.DeletionTimestamp != nil:
				exit = 137 // killed
			case staging && longRunning && pod.Status.Phase == corev1.PodRunning:
				continue
			}
			pod.Status.Phase = corev1.PodSucceeded
			if exit != 0 {
				pod.Status.Phase = corev1.PodFailed
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
			switch protocol.Phase(pod.Labels[protocol.LabelPhase]) {
			case protocol.PhaseStaging:
				_ = os.MkdirAll(filepath.Join(dir, protocol.FileVolume), 0o755)
				if longRunning && exit == 0 {
					// Running before /pav/ready: a publish that saw it
					// sees the pod running, and what the test writes
					// after it is not overwritten here.
					pod.Status.Phase = corev1.PodRunning
					pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
						State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
					if _, err := f.kube.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{FieldManager: kubeletManager}); err == nil {
						_ = os.WriteFile(filepath.Join(dir, protocol.FileReady), nil, 0o644)
					}
					continue
				}
			case protocol.PhaseInlineCreation:
				pod.Annotations[protocol.AnnotationResultCapacity] = "2Mi"
				pod.Annotations[protocol.AnnotationResultsCollected] = "true"
			case protocol.PhaseInlineDeletion:
				pod.Annotations[protocol.AnnotationResultsCollected] = "true"
			}
			_, _ = f.kube.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{FieldManager: kubeletManager})
		}
		time.Sleep(time.Millisecond)
	}
}

// nodeScenario is a flow of the node plugin: setup runs without faults,
// then each step is called as kubelet or the recovery queue calls it,
// again until it succeeds; check looks at the end state.
type nodeScenario struct {
	fixture func(t *testing.T) *stagerFixture
	// longRunning: staging pods serve until deleted (/pav/ready).
	longRunning bool
	setup       func(f *stagerFixture)
	steps       []func(ctx context.Context, f *stagerFixture) error
	check       func(t *testing.T, f *stagerFixture)
	// once are the phases whose pods must each be created exactly once
	// in the steps, whatever fails (their work is not to be done twice).
	once []protocol.Phase
}

// faultRun is one run of a scenario with its reactors.
type faultRun struct {
	f *stagerFixture

	mu      sync.Mutex
	dead    bool // the node plugin crashed: its writes fail until restart
	created map[protocol.Phase]int
	writes  []string
}

func (sc nodeScenario) start(t *testing.T) *faultRun {
	f := sc.fixture(t)
	fakeapi.HonorFinalizers(&f.kube.Fake, f.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("pods"), time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go f.playKubelet(ctx, sc.longRunning)
	if sc.setup != nil {
		sc.setup(f)
	}
	r := &faultRun{f: f, created: map[protocol.Phase]int{}}
	// Counts what reaches the API (prepended first: the fault reactor,
	// prepended later, runs before it).
	f.kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !isNodeWrite(a) {
			return false, nil, nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.writes = append(r.writes, describeWrite(a))
		if c, ok := a.(k8stesting.CreateAction); ok {
			if pod, ok := c.GetObject().(*corev1.Pod); ok {
				r.created[protocol.Phase(pod.Labels[protocol.LabelPhase])]++
			}
		}
		return false, nil, nil
	})
	return r
}

func describeWrite(a k8stesting.Action) string {
	name := ""
	switch a := a.(type) {
	case k8stesting.CreateAction:
		if m, err := metaOf(a.GetObject()); err == nil {
			name = m.GetName()
		}
	case k8stesting.UpdateAction:
		if m, err := metaOf(a.GetObject()); err == nil {
			name = m.GetName()
		}
	case k8stesting.PatchAction:
		name = a.GetName()
	case k8stesting.DeleteAction:
		name = a.GetName()
	}
	return fmt.Sprintf("%s %s %s", a.GetVerb(), a.GetResource().Resource, name)
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// run calls each step until it succeeds; a crashed node plugin is
// restarted (a new Stager, nothing in memory) after the call it died in.
func (r *faultRun) run(t *testing.T, sc nodeScenario) {
	t.Helper()
	for i, step := range sc.steps {
		var err error
		// With backoff, as kubelet and the recovery queue retry: a call
		// may end early while the pod cache lags behind the API.
		backoff := 5 * time.Millisecond
		for attempt := 0; attempt < 20; attempt, backoff = attempt+1, min(2*backoff, 200*time.Millisecond) {
			if attempt > 0 {
				time.Sleep(backoff)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err = step(ctx, r.f)
			cancel()
			r.mu.Lock()
			if r.dead {
				r.dead = false
				r.f.stager = NewStager(r.f.cfg)
				err = errors.New("the node plugin restarted")
			}
			r.mu.Unlock()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("step %d never succeeded: %v\nwrites: %s", i+1, err, strings.Join(r.writeLog(), "; "))
		}
	}
	sc.check(t, r.f)
	for _, phase := range sc.once {
		r.mu.Lock()
		n := r.created[phase]
		r.mu.Unlock()
		if n != 1 {
			t.Errorf("%d %s pods created, want 1\nwrites: %s", n, phase, strings.Join(r.writeLog(), "; "))
		}
	}
}

func (r *faultRun) writeLog() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// testNodeFaults runs sc cleanly, then once per write of the clean run and
// per fault: the node plugin dies just before the write or just after it
// (every later write of the dead process fails, and a new Stager takes
// over), or the API server fails that write alone.
func testNodeFaults(t *testing.T, sc nodeScenario) {
	clean := sc.start(t)
	clean.run(t, sc)
	writes := len(clean.writeLog())
	if writes < 2 {
		t.Fatalf("only %d writes in a clean run: %v", writes, clean.writeLog())
	}
	injected := errors.New("injected fault")
	for _, kind := range []string{"crash before", "crash after", "error"} {
		for n := 1; n <= writes; n++ {
			t.Run(fmt.Sprintf("%s write %d", kind, n), func(t *testing.T) {
				r := sc.start(t)
				seen, done := 0, false
				fake := &r.f.kube.Fake
				fake.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if !isNodeWrite(a) {
						return false, nil, nil
					}
					r.mu.Lock()
					defer r.mu.Unlock()
					if r.dead {
						return true, nil, apierrors.NewInternalError(errors.New("the node plugin is dead"))
					}
					if done {
						return false, nil, nil
					}
					if seen++; seen < n {
						return false, nil, nil
					}
					done = true
					if kind == "crash after" {
						// Through the rest of the chain, as the write would have gone.
						r.mu.Unlock()
						for _, rc := range fake.ReactionChain[1:] {
							if !rc.Handles(a) {
								continue
							}
							if handled, _, err := rc.React(a); handled {
								if err != nil {
									t.Errorf("performing %s: %v", describeWrite(a), err)
								}
								break
							}
						}
						r.mu.Lock()
					}
					r.dead = kind != "error"
					return true, nil, apierrors.NewInternalError(injected)
				})
				r.run(t, sc)
				r.mu.Lock()
				defer r.mu.Unlock()
				if !done {
					t.Fatalf("write %d never happened: %v", n, r.writes)
				}
			})
		}
	}
}

// checkNothingLeft: no pod, mount, /pav directory or target path is left.
// The directories of pods that are gone are also the collector's to
// remove (an inline volume's creation and deletion pods', a pod's deleted
// by a node plugin that died before it removed the directory): its sweep
// runs first.
func checkNothingLeft(t *testing.T, f *stagerFixture) {
	t.Helper()
	if pods := f.pods(); len(pods) != 0 {
		t.Fatalf("pods left: %v", podNames(pods))
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounts left: %+v", f.mounter.MountPoints)
	}
	if _, err := os.Stat(f.target); !os.IsNotExist(err) {
		t.Errorf("target path left: %v", err)
	}
	c := collector.New(f.kube, f.cfg.Pods, f.mounter, f.root, f.exits)
	testwait.Until(t, "the collector's sweep to empty "+f.root, func() bool {
		_ = c.SweepOrphans(time.Now().Add(time.Hour))
		entries, _ := os.ReadDir(f.root)
		return len(entries) == 0
	})
}

// TestUnstagingSurvivesAFaultAtEveryWrite: NodeUnpublishVolume stops the
// staging pod, runs the unstaging pod once, and releases both, whatever
// write fails.
func TestUnstagingSurvivesAFaultAtEveryWrite(t *testing.T) {
	testNodeFaults(t, nodeScenario{
		fixture: func(t *testing.T) *stagerFixture { return newStagerFixture(t, nil) },
		setup: func(f *stagerFixture) {
			if err := f.publish(context.Background()); err != nil {
				f.t.Fatal(err)
			}
		},
		steps: []func(context.Context, *stagerFixture) error{
			func(ctx context.Context, f *stagerFixture) error {
				return f.stager.Unpublish(ctx, testDriver, testHandle, f.target)
			},
		},
		check: checkNothingLeft,
		once:  []protocol.Phase{protocol.PhaseUnstaging},
	})
}

// TestInlineVolumeSurvivesAFaultAtEveryWrite: a CSI inline ephemeral
// volume, published then unpublished: created once, staged, unstaged and
// deleted once, its creation pod (the volume's record) released last,
// whatever write fails.
func TestInlineVolumeSurvivesAFaultAtEveryWrite(t *testing.T) {
	var req *pavcsi.PublishRequest
	testNodeFaults(t, nodeScenario{
		fixture: func(t *testing.T) *stagerFixture {
			f, r := inlineFixture(t)
			req = r
			return f
		},
		steps: []func(context.Context, *stagerFixture) error{
			func(ctx context.Context, f *stagerFixture) error {
				err := f.stager.Publish(ctx, testDriver, req)
				if err == nil && len(f.mounter.MountPoints) != 1 {
					f.t.Errorf("published, but mounts are %+v", f.mounter.MountPoints)
				}
				return err
			},
			func(ctx context.Context, f *stagerFixture) error {
				return f.stager.Unpublish(ctx, testDriver, inlineVolumeID, f.target)
			},
		},
		check: checkNothingLeft,
		once:  []protocol.Phase{protocol.PhaseInlineCreation, protocol.PhaseInlineDeletion},
	})
}

// noContainers is a container runtime whose pods run no container (the
// client's containers are restarting): nothing to replace in them.
type noContainers struct{}

func (noContainers) PodPIDs(context.Context, types.UID) ([]int, error) { return nil, nil }

// TestRecoverySurvivesAFaultAtEveryWrite: a recorded recovery of a staging
// that stopped under a client is carried out: the old staging unstaged
// once, one new staging pod, which carries the record until the volume is
// replaced, then the old pod released and the record removed, whatever
// write fails.
func TestRecoverySurvivesAFaultAtEveryWrite(t *testing.T) {
	var id string
	testNodeFaults(t, nodeScenario{
		fixture: func(t *testing.T) *stagerFixture {
			f := newStagerFixture(t, nil).withUIDs() // the new pod is named after the old one's UID
			f.cfg.Recovery, f.cfg.Processes = true, noContainers{}
			f.stager = NewStager(f.cfg)
			return f
		},
		longRunning: true,
		setup: func(f *stagerFixture) {
			ctx := context.Background()
			client, err := f.kube.CoreV1().Pods("ns").Create(ctx, newClientPod(), metav1.CreateOptions{})
			if err != nil {
				f.t.Fatal(err)
			}
			if err := f.publish(ctx); err != nil {
				f.t.Fatal(err)
			}
			old := f.waitForPod(protocol.PhaseStaging)
			f.setPhase(old, corev1.PodFailed, 137) // the daemon was killed
			id = old.Labels[protocol.LabelStagingID]
			rec := &recoveryRecord{Replaces: []string{"0:42:/"}, Clients: []types.UID{client.UID}, Since: time.Now()}
			if err := f.stager.recordRecovery(ctx, old, rec); err != nil {
				f.t.Fatal(err)
			}
			testwait.Until(f.t, "the cache to show the recorded staging pod", func() bool {
				cached, err := f.stager.nodePods.Find(ctx, protocol.PhaseStaging, id)
				if err != nil || cached == nil {
					return false
				}
				_, recorded := cached.Annotations[protocol.AnnotationRecovering]
				return recorded && cached.Status.Phase == corev1.PodFailed
			})
		},
		steps: []func(context.Context, *stagerFixture) error{
			func(ctx context.Context, f *stagerFixture) error {
				if err := f.stager.recover(ctx, id); err != nil {
					return err
				}
				// Done when the live staging pod is the new one, with no
				// record left (recover returns nil also when the cache lags).
				var stagings []corev1.Pod
				for _, p := range f.pods() {
					if p.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
						stagings = append(stagings, p)
					}
				}
				if len(stagings) != 1 {
					return fmt.Errorf("staging pods %v, want the new one only", podNames(stagings))
				}
				if _, recording := stagings[0].Annotations[protocol.AnnotationRecovering]; recording || !strings.Contains(stagings[0].Name, "-") || stagings[0].DeletionTimestamp != nil {
					return fmt.Errorf("staging pod %s: annotations %v", stagings[0].Name, stagings[0].Annotations)
				}
				return nil
			},
		},
		check: func(t *testing.T, f *stagerFixture) {
			for _, p := range f.pods() {
				if ph := p.Labels[protocol.LabelPhase]; ph != string(protocol.PhaseStaging) && ph != "" {
					t.Errorf("%s pod %s left", ph, p.Name)
				}
			}
			if len(f.mounter.MountPoints) != 1 {
				t.Errorf("mounts %+v, want the new volume's at the target", f.mounter.MountPoints)
			}
		},
		once: []protocol.Phase{protocol.PhaseStaging, protocol.PhaseUnstaging},
	})
}
