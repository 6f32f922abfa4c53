//go:build integration

package integration

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/test/integration/framework"
)

// kubeclient.Reviews, which guards /metrics, against a real API server: who
// a token is, and whether a user may get /metrics.
func TestReviews(t *testing.T) {
	env := framework.New(t)
	r, err := kubeclient.NewReviews(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for token, want := range map[string]bool{env.Config.BearerToken: true, "forged": false} {
		tr, err := r.TokenReview(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status.Authenticated != want {
			t.Errorf("token review of a %v token: authenticated %v (%+v)", want, tr.Status.Authenticated, tr.Status)
		}
	}
	for _, c := range []struct {
		groups []string
		want   bool
	}{{[]string{"system:authenticated"}, false}, {[]string{"system:masters"}, true}} {
		sar, err := r.SubjectAccessReview(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "someone", Groups: c.groups, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.want {
			t.Errorf("may a user of groups %v get /metrics: %v, want %v", c.groups, sar.Status.Allowed, c.want)
		}
	}
}
