// Package containerdtest is a fake containerd for tests of what follows
// containerd's events.
package containerdtest

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/albertofaria/pav/kubelet"
	"github.com/albertofaria/pav/nodeagent/containerd"
	taskevents "github.com/containerd/containerd/api/events"
	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// Server is a fake containerd for tests: it serves what containerd.Watch
// uses of containerd's API on a unix socket: the Events service's Subscribe and the Containers service's Get.
type Server struct {
	eventsapi.UnimplementedEventsServer
	containersapi.UnimplementedContainersServer
	sock   string
	srv    *grpc.Server
	events chan *eventsapi.Envelope
	mu     sync.Mutex
	labels map[string]map[string]string // by container ID
	// subscribed receives the filters of each subscription.
	Subscribed chan []string
}

// New serves a fake containerd on a socket of its own until the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{
		sock:       filepath.Join(t.TempDir(), "containerd.sock"),
		events:     make(chan *eventsapi.Envelope, 16),
		labels:     map[string]map[string]string{},
		Subscribed: make(chan []string, 16),
	}
	f.Start(t)
	t.Cleanup(func() { f.srv.Stop() })
	return f
}

// Start serves on the socket (again, after stop: a restarted containerd).
func (f *Server) Start(t testing.TB) {
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

func (f *Server) Subscribe(req *eventsapi.SubscribeRequest, stream eventsapi.Events_SubscribeServer) error {
	if md, _ := metadata.FromIncomingContext(stream.Context()); len(md.Get(kubelet.ContainerdNamespaceHeader)) == 0 {
		return status.Error(codes.FailedPrecondition, "no namespace")
	}
	f.Subscribed <- req.Filters
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

func (f *Server) Get(ctx context.Context, req *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
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

// AddContainer makes a container kubelet created for a pod.
func (f *Server) AddContainer(id, podUID, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels[id] = map[string]string{kubelet.LabelPodUID: podUID, kubelet.LabelContainerName: name, kubelet.LabelKind: "container",
		"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "default"}
}

// Exit sends the exit of process id of container cid.
func (f *Server) Exit(t testing.TB, namespace, cid, id string, code uint32) {
	t.Helper()
	ev, err := anypb.New(&taskevents.TaskExit{ContainerID: cid, ID: id, Pid: 42, ExitStatus: code})
	if err != nil {
		t.Fatal(err)
	}
	f.Send(&eventsapi.Envelope{Namespace: namespace, Topic: kubelet.TopicTaskExit, Event: ev})
}

// Watch runs containerd.Watch on f until the test ends and returns the exits it reports.
func (f *Server) Watch(t testing.TB, record func(containerd.Exit)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		containerd.Watch(ctx, "unix://"+f.sock, record)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Stop stops serving, as containerd does when it restarts.
func (f *Server) Stop() { f.srv.Stop() }

// Send sends an event to the subscribers.
func (f *Server) Send(env *eventsapi.Envelope) { f.events <- env }

// SetLabels gives container id the labels (kubelet's or not).
func (f *Server) SetLabels(id string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels[id] = labels
}
