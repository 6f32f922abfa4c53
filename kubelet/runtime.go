package kubelet

import kubelettypes "k8s.io/kubelet/pkg/types"

// How kubelet's containers look in containerd: its CRI plugin keeps them in
// namespace k8s.io and labels each with the pod and container kubelet asked
// for (kubelet's own labels override any an image brings), and each pod's
// sandbox with kind "sandbox".
const (
	ContainerdNamespace = "k8s.io"
	// ContainerdNamespaceHeader is the gRPC metadata key that selects it.
	ContainerdNamespaceHeader = "containerd-namespace"
	// TopicTaskExit is the topic of containerd's events of a process exit.
	TopicTaskExit      = "/tasks/exit"
	LabelPodUID        = kubelettypes.KubernetesPodUIDLabel
	LabelContainerName = kubelettypes.KubernetesContainerNameLabel
	LabelKind          = "io.cri-containerd.kind"
	KindSandbox        = "sandbox"
)
