// Hand-written, as client-go's own (k8s.io/client-go/kubernetes/typed/core/v1,
// Apache License 2.0): the one pods subresource PaV reads that client-gen does
// not generate.

package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/kubeclient/generated/clientset/scheme"
)

// PodExpansion adds to PodInterface what client-gen cannot generate.
type PodExpansion interface {
	// GetLogs builds a request for a container's log.
	GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
}

func (c *pods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return c.GetClient().Get().Namespace(c.GetNamespace()).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, scheme.ParameterCodec)
}
