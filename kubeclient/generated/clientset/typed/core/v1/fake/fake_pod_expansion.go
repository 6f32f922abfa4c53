// Hand-written, as client-go's own (k8s.io/client-go/kubernetes/typed/core/v1/fake,
// Apache License 2.0): pods' log, "fake logs" unless a reactor returns a
// *runtime.Unknown.

package fake

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	fakerest "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/testing"

	"github.com/albertofaria/pav/kubeclient/generated/clientset/scheme"
)

func (c *fakePods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	action := testing.GenericActionImpl{}
	action.Verb = "get"
	action.Namespace = c.Namespace()
	action.Resource = c.Resource()
	action.Subresource = "log"
	action.Value = opts

	defaultLogResponse := &runtime.Unknown{Raw: []byte("fake logs")}
	obj, err := c.Fake.Invokes(action, defaultLogResponse)
	logs := defaultLogResponse.Raw
	if err == nil {
		unknown, ok := obj.(*runtime.Unknown)
		if !ok || unknown == nil {
			err = fmt.Errorf("fake Pods.GetLogs expected reactor to return *runtime.Unknown, got %T", obj)
		} else {
			logs = unknown.Raw
		}
	}

	fakeClient := &fakerest.RESTClient{
		Client: fakerest.CreateHTTPClient(func(*http.Request) (*http.Response, error) {
			if err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(logs))}, nil
		}),
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
		GroupVersion:         c.Kind().GroupVersion(),
		VersionedAPIPath:     fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log", c.Namespace(), name),
	}
	return fakeClient.Request()
}
