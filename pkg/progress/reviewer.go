package progress

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	authclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/clock"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// Pod is the pod a token was issued for.
type Pod struct {
	Namespace, Name string
	UID             types.UID
}

// The extra fields the API server gives a token bound to a pod.
const (
	podNameExtra = "authentication.kubernetes.io/pod-name"
	podUIDExtra  = "authentication.kubernetes.io/pod-uid"
)

// How long a review's answer is kept, by the token's hash: a pod reports with the same token
// for most of an hour (the kubelet renews it at 80% of its life), so one review serves it for
// reviewTTL; a refusal is kept shorter (a token may be refused while its pod is being made).
// At most MaxReviewsInFlight tokens are under review at once: the rest are answered 429 at
// once. Reviews go through a client of their own (pkg/metrics.ReviewConfig's budget), never
// the jobs' bucket.
const (
	reviewTTL          = 5 * time.Minute
	refusalTTL         = 10 * time.Second
	MaxReviewsInFlight = 8
	maxCachedReviews   = 10000
)

// Reviewer authenticates the pods' tokens with TokenReviews for the progress audience.
type Reviewer struct {
	reviews  authclient.TokenReviewInterface
	clock    clock.PassiveClock
	inFlight chan struct{}

	mu    sync.Mutex
	cache map[[32]byte]review
}

type review struct {
	pod     Pod
	status  int
	err     error
	expires time.Time
}

// NewReviewer reviews tokens through reviews.
func NewReviewer(reviews authclient.TokenReviewInterface) *Reviewer {
	return &Reviewer{reviews: reviews, clock: clock.RealClock{}, inFlight: make(chan struct{}, MaxReviewsInFlight),
		cache: map[[32]byte]review{}}
}

// Review says which pod token was issued for; when it is not taken, the HTTP status to answer.
func (r *Reviewer) Review(ctx context.Context, token string) (Pod, int, error) {
	key := sha256.Sum256([]byte(token))
	now := r.clock.Now()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.pod, c.status, c.err
	}
	select {
	case r.inFlight <- struct{}{}:
		defer func() { <-r.inFlight }()
	default:
		return Pod{}, http.StatusTooManyRequests, errors.New("too many tokens under review")
	}
	c = r.review(ctx, token)
	if c.status == http.StatusServiceUnavailable {
		return c.pod, c.status, c.err // the API server did not answer: ask again next time
	}
	c.expires = now.Add(reviewTTL)
	if c.err != nil {
		c.expires = now.Add(refusalTTL)
	}
	r.mu.Lock()
	if len(r.cache) >= maxCachedReviews {
		for k, v := range r.cache {
			if !now.Before(v.expires) || len(r.cache) >= maxCachedReviews {
				delete(r.cache, k)
			}
		}
	}
	r.cache[key] = c
	r.mu.Unlock()
	return c.pod, c.status, c.err
}

func (r *Reviewer) review(ctx context.Context, token string) review {
	tr, err := r.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: token, Audiences: []string{troupev1.ProgressAudience},
	}}, metav1.CreateOptions{})
	if err != nil {
		return review{status: http.StatusServiceUnavailable, err: fmt.Errorf("reviewing the token: %w", err)}
	}
	st := tr.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, troupev1.ProgressAudience) {
		return review{status: http.StatusUnauthorized, err: errors.New("the token is not a pod's token for the audience " + troupev1.ProgressAudience)}
	}
	names, uids := st.User.Extra[podNameExtra], st.User.Extra[podUIDExtra]
	ns, ok := serviceAccountNamespace(st.User.Username)
	if len(names) != 1 || len(uids) != 1 || !ok {
		return review{status: http.StatusUnauthorized, err: errors.New("the token is not bound to a pod")}
	}
	return review{pod: Pod{Namespace: ns, Name: names[0], UID: types.UID(uids[0])}}
}

// serviceAccountNamespace is the namespace of a ServiceAccount's user name
// (system:serviceaccount:<namespace>:<name>).
func serviceAccountNamespace(user string) (string, bool) {
	const prefix = "system:serviceaccount:"
	if len(user) <= len(prefix) || user[:len(prefix)] != prefix {
		return "", false
	}
	rest := user[len(prefix):]
	for i := range len(rest) {
		if rest[i] == ':' {
			return rest[:i], i > 0
		}
	}
	return "", false
}
