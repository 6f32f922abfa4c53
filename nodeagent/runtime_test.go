package nodeagent

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/albertofaria/pav/kubelet"
	taskevents "github.com/containerd/containerd/api/events"
	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// fakeContainerd serves what WatchContainerd uses of containerd's API on a
// unix socket: the Events service's Subscribe and the Containers service's Get.
type fakeContainerd struct {
	eventsapi.UnimplementedEventsServer
	containersapi.UnimplementedContainersServer
	sock   string
	srv    *grpc.Server
	events chan *eventsapi.Envelope
	mu     sync.Mutex
	labels map[string]map[string]string // by container ID
	// subscribed receives the filters of each subscription.
	subscribed chan []string
}

func newFakeContainerd(t testing.TB) *fakeContainerd {
	t.Helper()
	f := &fakeContainerd{
		sock:       filepath.Join(t.TempDir(), "containerd.sock"),
		events:     make(chan *eventsapi.Envelope, 16),
		labels:     map[string]map[string]string{},
		subscribed: make(chan []string, 16),
	}
	f.start(t)
	t.Cleanup(func() { f.srv.Stop() })
	return f
}

// start serves on the socket (again, after stop: a restarted containerd).
func (f *fakeContainerd) start(t testing.TB) {
	t.Helper()
	l, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	eventsapi.RegisterEventsServer(f.srv, f)
	containersapi.RegisterContainersServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
}

func (f *fakeContainerd) Subscribe(req *eventsapi.SubscribeRequest, stream eventsapi.Events_SubscribeServer) error {
	if md, _ := metadata.FromIncomingContext(stream.Context()); len(md.Get(kubelet.ContainerdNamespaceHeader)) == 0 {
		return status.Error(codes.FailedPrecondition, "no namespace")
	}
	f.subscribed <- req.Filters
	for {
		select {
		case env := <-f.events:
			if err := stream.Send(env); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (f *fakeContainerd) Get(ctx context.Context, req *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(kubelet.ContainerdNamespaceHeader)) == 0 || md.Get(kubelet.ContainerdNamespaceHeader)[0] != kubelet.ContainerdNamespace {
		return nil, status.Error(codes.FailedPrecondition, "namespace k8s.io expected")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	labels, ok := f.labels[req.ID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q not found", req.ID)
	}
	return &containersapi.GetContainerResponse{Container: &containersapi.Container{ID: req.ID, Labels: labels}}, nil
}

// addContainer makes a container kubelet created for a pod.
func (f *fakeContainerd) addContainer(id, podUID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels[id] = map[string]string{kubelet.LabelPodUID: podUID, kubelet.LabelContainerName: name, kubelet.LabelKind: "container",
		"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "default"}
}

// exit sends the exit of process id of container cid.
func (f *fakeContainerd) exit(t testing.TB, namespace, cid, id string, code uint32) {
	t.Helper()
	ev, err := anypb.New(&taskevents.TaskExit{ContainerID: cid, ID: id, Pid: 42, ExitStatus: code})
	if err != nil {
		t.Fatal(err)
	}
	f.events <- &eventsapi.Envelope{Namespace: namespace, Topic: kubelet.TopicTaskExit, Event: ev}
}

// watch runs WatchContainerd on f until the test ends and returns the exits it reports.
func (f *fakeContainerd) watch(t testing.TB, record func(containerExit)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchContainerd(ctx, "unix://"+f.sock, record)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestWatchContainerd(t *testing.T) {
	f := newFakeContainerd(t)
	got := make(chan containerExit, 16)
	f.watch(t, func(e containerExit) { got <- e })
	if filters := <-f.subscribed; len(filters) != 1 || filters[0] != `topic=="/tasks/exit",namespace=="k8s.io"` {
		t.Errorf("filters = %q", filters)
	}
	f.addContainer("c1", "uid-1", "main")
	f.mu.Lock()
	f.labels["sandbox"] = map[string]string{kubelet.LabelPodUID: "uid-1", kubelet.LabelContainerName: "POD", kubelet.LabelKind: kubelet.KindSandbox}
	f.labels["bare"] = map[string]string{"app": "not kubelet's"}
	f.mu.Unlock()

	// Not a pod container's exit: each is skipped, in order, before the last.
	f.exit(t, kubelet.ContainerdNamespace, "sandbox", "sandbox", 0)
	f.exit(t, kubelet.ContainerdNamespace, "c1", "exec-1", 0) // a process exec'd into c1
	f.exit(t, "moby", "c1", "c1", 0)
	f.exit(t, kubelet.ContainerdNamespace, "bare", "bare", 0)
	f.exit(t, kubelet.ContainerdNamespace, "gone", "gone", 0)
	f.events <- &eventsapi.Envelope{Namespace: kubelet.ContainerdNamespace, Topic: kubelet.TopicTaskExit, Event: &anypb.Any{TypeUrl: "x", Value: []byte{0xff, 0xff}}}
	f.exit(t, kubelet.ContainerdNamespace, "c1", "c1", 3)

	select {
	case e := <-got:
		if want := (containerExit{PodUID: "uid-1", Container: "main", Status: 3}); e != want {
			t.Errorf("exit = %+v, want %+v", e, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported")
	}
}

// A broken stream (containerd restarted) is subscribed again.
func TestWatchContainerdResubscribes(t *testing.T) {
	f := newFakeContainerd(t)
	got := make(chan containerExit, 16)
	f.watch(t, func(e containerExit) { got <- e })
	<-f.subscribed
	f.srv.Stop()
	f.start(t)
	<-f.subscribed
	f.addContainer("c2", "uid-2", "main")
	f.exit(t, kubelet.ContainerdNamespace, "c2", "c2", 0)
	select {
	case e := <-got:
		if e.PodUID != "uid-2" || e.Status != 0 {
			t.Errorf("exit = %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported after containerd came back")
	}
}
