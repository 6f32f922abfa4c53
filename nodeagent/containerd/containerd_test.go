package containerd_test

import (
	"testing"
	"time"

	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/containerd"
	"github.com/albertofaria/pav/nodeagent/containerd/containerdtest"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestWatchContainerd(t *testing.T) {
	f := containerdtest.New(t)
	got := make(chan containerd.Exit, 16)
	f.Watch(t, func(e containerd.Exit) { got <- e })
	if filters := <-f.Subscribed; len(filters) != 1 || filters[0] != `topic=="/tasks/exit",namespace=="k8s.io"` {
		t.Errorf("filters = %q", filters)
	}
	f.AddContainer("c1", "uid-1", "main")
	f.SetLabels("sandbox", map[string]string{kubelet.LabelPodUID: "uid-1", kubelet.LabelContainerName: "POD", kubelet.LabelKind: kubelet.KindSandbox})
	f.SetLabels("bare", map[string]string{"app": "not kubelet's"})

	// Not a pod container's exit: each is skipped, in order, before the last.
	f.Exit(t, kubelet.ContainerdNamespace, "sandbox", "sandbox", 0)
	f.Exit(t, kubelet.ContainerdNamespace, "c1", "exec-1", 0) // a process exec'd into c1
	f.Exit(t, "moby", "c1", "c1", 0)
	f.Exit(t, kubelet.ContainerdNamespace, "bare", "bare", 0)
	f.Exit(t, kubelet.ContainerdNamespace, "gone", "gone", 0)
	f.Send(&eventsapi.Envelope{Namespace: kubelet.ContainerdNamespace, Topic: kubelet.TopicTaskExit, Event: &anypb.Any{TypeUrl: "x", Value: []byte{0xff, 0xff}}})
	f.Exit(t, kubelet.ContainerdNamespace, "c1", "c1", 3)

	select {
	case e := <-got:
		if want := (containerd.Exit{PodUID: "uid-1", Container: "main", Status: 3}); e != want {
			t.Errorf("exit = %+v, want %+v", e, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported")
	}
}

// A broken stream (containerd restarted) is subscribed again.
func TestWatchContainerdResubscribes(t *testing.T) {
	f := containerdtest.New(t)
	got := make(chan containerd.Exit, 16)
	f.Watch(t, func(e containerd.Exit) { got <- e })
	<-f.Subscribed
	f.Stop()
	f.Start(t)
	<-f.Subscribed
	f.AddContainer("c2", "uid-2", "main")
	f.Exit(t, kubelet.ContainerdNamespace, "c2", "c2", 0)
	select {
	case e := <-got:
		if e.PodUID != "uid-2" || e.Status != 0 {
			t.Errorf("exit = %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported after containerd came back")
	}
}
