package v1alpha1

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Scheme knows PavProvisioner and PavProvisionerList.
var Scheme = runtime.NewScheme()

func init() {
	Scheme.AddKnownTypes(SchemeGroupVersion, &PavProvisioner{}, &PavProvisionerList{})
	metav1.AddToGroupVersion(Scheme, SchemeGroupVersion)
}

// Client is a small typed client for the cluster-scoped PavProvisioner resource.
// (A generated clientset would bring a code-generation step for six methods.)
type Client struct {
	rest rest.Interface
}

// NewClient builds a Client from a REST config.
func NewClient(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &Client{rest: rc}, nil
}

func (c *Client) Get(ctx context.Context, name string, opts metav1.GetOptions) (*PavProvisioner, error) {
	out := &PavProvisioner{}
	err := c.rest.Get().Resource(Resource).Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *Client) List(ctx context.Context, opts metav1.ListOptions) (*PavProvisionerList, error) {
	out := &PavProvisionerList{}
	err := c.rest.Get().Resource(Resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *Client) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Resource(Resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

func (c *Client) Create(ctx context.Context, p *PavProvisioner, opts metav1.CreateOptions) (*PavProvisioner, error) {
	out := &PavProvisioner{}
	err := c.rest.Post().Resource(Resource).VersionedParams(&opts, metav1.ParameterCodec).Body(p).Do(ctx).Into(out)
	return out, err
}

func (c *Client) Update(ctx context.Context, p *PavProvisioner, opts metav1.UpdateOptions) (*PavProvisioner, error) {
	out := &PavProvisioner{}
	err := c.rest.Put().Resource(Resource).Name(p.Name).VersionedParams(&opts, metav1.ParameterCodec).Body(p).Do(ctx).Into(out)
	return out, err
}

func (c *Client) UpdateStatus(ctx context.Context, p *PavProvisioner, opts metav1.UpdateOptions) (*PavProvisioner, error) {
	out := &PavProvisioner{}
	err := c.rest.Put().Resource(Resource).Name(p.Name).SubResource("status").VersionedParams(&opts, metav1.ParameterCodec).Body(p).Do(ctx).Into(out)
	return out, err
}

func (c *Client) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.rest.Delete().Resource(Resource).Name(name).Body(&opts).Do(ctx).Error()
}

// NewInformer returns a shared informer over all PavProvisioners.
func NewInformer(c *Client, resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
			return c.List(context.Background(), opts)
		},
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(context.Background(), opts)
		},
	}
	return cache.NewSharedIndexInformer(lw, &PavProvisioner{}, resync, cache.Indexers{})
}
