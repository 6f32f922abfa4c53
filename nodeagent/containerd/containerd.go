// Learning of container exits from the container runtime itself, before
// kubelet's next relist (up to a second later) puts them into the pod status.

package containerd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/albertofaria/pav/kubelet"
	taskevents "github.com/containerd/containerd/api/events"
	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Exit is one exit of a pod's container, as the runtime reported it.
type Exit struct {
	PodUID    types.UID
	Container string
	Status    uint32
}

// Watch follows containerd's task exit events at endpoint
// ("unix:///run/containerd/containerd.sock" or a socket path) and hands
// every exit of a pod's container to record, until ctx ends. A broken stream
// (containerd restarted, say) is subscribed again with backoff; exits missed
// meanwhile are only learnt from the pod status, as without this watch.
func Watch(ctx context.Context, endpoint string, record func(Exit)) {
	conn, err := dial(endpoint)
	if err != nil {
		klog.ErrorS(err, "Not watching the container runtime's exit events", "endpoint", endpoint)
		return
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, kubelet.ContainerdNamespaceHeader, kubelet.ContainerdNamespace)
	w := subscription{events: eventsapi.NewEventsClient(conn), containers: containersapi.NewContainersClient(conn), record: record}
	const minDelay, maxDelay = 100 * time.Millisecond, 30 * time.Second
	delay, logged := minDelay, false
	for {
		start := time.Now()
		subscribed, err := w.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxDelay {
			delay = minDelay // it worked for a while: this is a new failure
		}
		// Said once per outage: a node without containerd would repeat it forever.
		if subscribed || !logged {
			klog.ErrorS(err, "Container runtime's exit events interrupted; until they are back, exits are learnt from pod status", "endpoint", endpoint)
		} else {
			klog.V(4).InfoS("Container runtime's exit events still unavailable", "endpoint", endpoint, "err", err, "retryIn", delay)
		}
		logged = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

type subscription struct {
	events     eventsapi.EventsClient
	containers containersapi.ContainersClient
	record     func(Exit)
}

// follow subscribes to task exits and handles them until the stream breaks;
// subscribed says whether it got that far.
func (w subscription) follow(ctx context.Context) (subscribed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.events.Subscribe(ctx, &eventsapi.SubscribeRequest{
		Filters: []string{fmt.Sprintf(`topic==%q,namespace==%q`, kubelet.TopicTaskExit, kubelet.ContainerdNamespace)},
	})
	if err != nil {
		return false, fmt.Errorf("subscribing to containerd's events: %w", err)
	}
	klog.V(1).InfoS("Watching the container runtime's exit events")
	for {
		env, err := stream.Recv()
		if err != nil {
			return true, fmt.Errorf("receiving containerd's events: %w", err)
		}
		if e, ok := w.exit(ctx, env); ok {
			w.record(e)
		}
	}
}

// exit turns an event into a pod container's exit; ok is false for anything
// else (an exec'd process, a sandbox, a container kubelet did not make, an
// event that does not parse).
func (w subscription) exit(ctx context.Context, env *eventsapi.Envelope) (Exit, bool) {
	if env.GetTopic() != kubelet.TopicTaskExit || env.GetNamespace() != kubelet.ContainerdNamespace || env.GetEvent() == nil {
		return Exit{}, false
	}
	var te taskevents.TaskExit
	if err := proto.Unmarshal(env.GetEvent().GetValue(), &te); err != nil {
		klog.V(4).InfoS("Ignoring a task exit event that does not parse", "err", err)
		return Exit{}, false
	}
	// ID is the process: the container's own (its init process) or one
	// exec'd into it, e.g. by an exec probe.
	if te.ContainerID == "" || te.ID != te.ContainerID {
		return Exit{}, false
	}
	getCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.containers.Get(getCtx, &containersapi.GetContainerRequest{ID: te.ContainerID})
	if err != nil {
		// Removed already, say: the pod status will tell.
		klog.V(4).InfoS("Ignoring the exit of a container containerd does not describe", "container", te.ContainerID, "err", err)
		return Exit{}, false
	}
	labels := resp.GetContainer().GetLabels()
	uid, name := labels[kubelet.LabelPodUID], labels[kubelet.LabelContainerName]
	if labels[kubelet.LabelKind] == kubelet.KindSandbox || uid == "" || name == "" {
		return Exit{}, false
	}
	return Exit{PodUID: types.UID(uid), Container: name, Status: te.ExitStatus}, true
}

// Processes finds the processes of a pod's running containers
// through containerd, by the pod UID kubelet labels each container with.
type Processes struct {
	containers containersapi.ContainersClient
	tasks      tasksapi.TasksClient
}

// NewProcesses connects (lazily) to containerd at endpoint.
func NewProcesses(endpoint string) (*Processes, error) {
	conn, err := dial(endpoint)
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", endpoint, err)
	}
	return &Processes{containers: containersapi.NewContainersClient(conn), tasks: tasksapi.NewTasksClient(conn)}, nil
}

// PodPIDs returns the main process of each running container of the pod
// (not its sandbox), as PIDs of the host's PID namespace.
func (c *Processes) PodPIDs(ctx context.Context, uid types.UID) ([]int, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, kubelet.ContainerdNamespaceHeader, kubelet.ContainerdNamespace)
	list, err := c.containers.List(ctx, &containersapi.ListContainersRequest{
		Filters: []string{fmt.Sprintf(`labels.%q==%q`, kubelet.LabelPodUID, string(uid))},
	})
	if err != nil {
		return nil, fmt.Errorf("listing the containers of pod %s in containerd: %w", uid, err)
	}
	var pids []int
	for _, ctr := range list.GetContainers() {
		if ctr.GetLabels()[kubelet.LabelKind] == kubelet.KindSandbox || ctr.GetLabels()[kubelet.LabelPodUID] != string(uid) {
			continue
		}
		task, err := c.tasks.Get(ctx, &tasksapi.GetRequest{ContainerID: ctr.GetID()})
		if err != nil {
			continue // not running (exited, or being created)
		}
		if p := task.GetProcess(); p.GetPid() != 0 && p.GetStatus() == tasktypes.Status_RUNNING {
			pids = append(pids, int(p.GetPid()))
		}
	}
	return pids, nil
}

// dial makes a (lazy) client connection to containerd's socket,
// given as "unix:///run/containerd/containerd.sock" or a path.
func dial(endpoint string) (*grpc.ClientConn, error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
