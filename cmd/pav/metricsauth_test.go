package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// fakeReviews plays the API server: tokens "scraper" (allowed /metrics) and
// "tenant" (not) are valid, any other is not.
type fakeReviews struct{ tokenReviews, accessReviews int }

func (f *fakeReviews) TokenReview(_ context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	f.tokenReviews++
	out := r.DeepCopy()
	if t := r.Spec.Token; t == "scraper" || t == "tenant" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: t, Groups: []string{"system:authenticated"}}}
	}
	return out, nil
}

func (f *fakeReviews) SubjectAccessReview(_ context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	f.accessReviews++
	out := r.DeepCopy()
	a := r.Spec.NonResourceAttributes
	out.Status.Allowed = r.Spec.User == "scraper" && a != nil && a.Path == "/metrics" && a.Verb == "get" && r.Spec.ResourceAttributes == nil
	return out, nil
}

// /metrics answers 401 without a valid bearer token, 403 to a user who may
// not get /metrics, and the metrics to one who may; a decision is reused.
func TestMetricsNeedAuthorizedToken(t *testing.T) {
	reviews := &fakeReviews{}
	srv := httptest.NewServer(newMetricsAccess(reviews, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pav_build_info 1\n")
	})))
	defer srv.Close()
	get := func(auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		what, auth string
		status     int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"basic credentials", "Basic c2NyYXBlcjp4", http.StatusUnauthorized},
		{"an invalid token", "Bearer forged", http.StatusUnauthorized},
		{"a user who may not get /metrics", "Bearer tenant", http.StatusForbidden},
		{"a user who may", "Bearer scraper", http.StatusOK},
	} {
		status, body := get(c.auth)
		if status != c.status {
			t.Errorf("%s: %d %q, want %d", c.what, status, body, c.status)
		}
		if metrics := strings.Contains(body, "pav_build_info"); metrics != (c.status == http.StatusOK) {
			t.Errorf("%s: the metrics are in the answer: %v, want %v", c.what, metrics, c.status == http.StatusOK)
		}
	}
	tokens, access := reviews.tokenReviews, reviews.accessReviews
	if status, _ := get("Bearer scraper"); status != http.StatusOK {
		t.Errorf("again, a user who may: %d", status)
	}
	if reviews.tokenReviews != tokens || reviews.accessReviews != access {
		t.Errorf("a repeated scrape asked the API server again (%d token and %d access reviews, were %d and %d)",
			reviews.tokenReviews, reviews.accessReviews, tokens, access)
	}
}
