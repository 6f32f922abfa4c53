package kubeclient

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// Reviews asks the API server who a bearer token is (TokenReview) and what
// a user may do (SubjectAccessReview): the delegated authentication and
// authorization of kube-apiserver's own clients, which k8s.io/apiserver's
// delegating authenticator and authorizer make, without that module (it
// links client-go's all-groups scheme and much of the API server).
type Reviews struct {
	authentication, authorization rest.Interface
}

var reviewCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s)
}()

// NewReviews builds a Reviews client on cfg.
func NewReviews(cfg *rest.Config) (*Reviews, error) {
	client := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath, c.GroupVersion, c.NegotiatedSerializer = "/apis", &gv, reviewCodecs.WithoutConversion()
		c.ContentType = runtime.ContentTypeJSON
		return rest.RESTClientFor(c)
	}
	var r Reviews
	var err error
	if r.authentication, err = client(authenticationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("kubernetes client for TokenReviews: %w", err)
	}
	if r.authorization, err = client(authorizationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("kubernetes client for SubjectAccessReviews: %w", err)
	}
	return &r, nil
}

// TokenReview creates review and returns the API server's answer.
func (r *Reviews) TokenReview(ctx context.Context, review *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	var out authenticationv1.TokenReview
	err := r.authentication.Post().Resource("tokenreviews").Body(review).Do(ctx).Into(&out)
	return &out, err
}

// SubjectAccessReview creates review and returns the API server's answer.
func (r *Reviews) SubjectAccessReview(ctx context.Context, review *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	var out authorizationv1.SubjectAccessReview
	err := r.authorization.Post().Resource("subjectaccessreviews").Body(review).Do(ctx).Into(&out)
	return &out, err
}
