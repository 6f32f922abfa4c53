package main

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/kubeclient"
)

// reviewer is what metricsAccess asks of the API server (kubeclient.Reviews).
type reviewer interface {
	TokenReview(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	SubjectAccessReview(context.Context, *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
}

// metricsAccess lets a request through to /metrics only if the API server
// says its bearer token is valid (TokenReview: else 401) and its user may
// get the non-resource URL /metrics (SubjectAccessReview: else 403), as
// kube-apiserver's delegated authentication and authorization do for the
// CSI sidecars and controller-runtime. Grant a scraper ClusterRole
// pav-metrics-reader. Decisions are kept for decisionTTL, at most
// maxDecisions of them, so a scraper costs the API server two reviews per
// interval at most and a flood of made-up tokens cannot grow the cache.
type metricsAccess struct {
	reviews reviewer
	next    http.Handler

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]decision
}

type decision struct {
	status  int // http.StatusOK, StatusUnauthorized or StatusForbidden
	expires time.Time
}

const (
	decisionTTL  = 10 * time.Second // kube-apiserver's default for delegated decisions
	maxDecisions = 1024
)

func newMetricsAccess(reviews reviewer, next http.Handler) *metricsAccess {
	return &metricsAccess{reviews: reviews, next: next, decisions: map[[sha256.Size]byte]decision{}}
}

func (a *metricsAccess) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
		return
	}
	key := sha256.Sum256([]byte(r.URL.Path + "\x00" + token))
	now := time.Now()
	a.mu.Lock()
	d, cached := a.decisions[key]
	a.mu.Unlock()
	if !cached || now.After(d.expires) {
		status, err := a.decide(r.Context(), token, r.URL.Path)
		if err != nil {
			klog.ErrorS(err, "Reviewing a request to the metrics endpoint")
			http.Error(w, "the API server could not review the request", http.StatusServiceUnavailable)
			return
		}
		d = decision{status: status, expires: now.Add(decisionTTL)}
		a.mu.Lock()
		if len(a.decisions) >= maxDecisions {
			clear(a.decisions)
		}
		a.decisions[key] = d
		a.mu.Unlock()
	}
	switch d.status {
	case http.StatusOK:
		a.next.ServeHTTP(w, r)
	case http.StatusUnauthorized:
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	default:
		http.Error(w, "Forbidden: get "+r.URL.Path+" is not allowed (ClusterRole pav-metrics-reader grants it)", http.StatusForbidden)
	}
}

// decide asks the API server who token is and whether they may get path.
func (a *metricsAccess) decide(ctx context.Context, token, path string) (int, error) {
	tr, err := a.reviews.TokenReview(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
	if err != nil {
		return 0, err
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.reviews.SubjectAccessReview(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
		}})
	if err != nil {
		return 0, err
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// metricsReviews is the reviewer of /metrics requests, nil when auth is off.
func metricsReviews(cfg *rest.Config, auth bool) (reviewer, error) {
	if !auth {
		return nil, nil
	}
	return kubeclient.NewReviews(cfg)
}
