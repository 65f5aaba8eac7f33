package metrics

import (
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The reviews of the metrics endpoint's callers (TokenReview, SubjectAccessReview) have a
// client budget of their own, apart from the bucket every job's requests share: a flood of
// scrapes with made-up tokens, each a review, waited in that bucket and delayed every tenant's
// jobs (docs/security.md). At most MaxReviewsInFlight requests are under review at once; the
// rest are answered 429 at once.
const (
	ReviewQPS          = 5
	ReviewBurst        = 10
	MaxReviewsInFlight = 8
)

// ReviewConfig is cfg as given (before the jobs' bucket is put on it) with the reviews' own
// small budget.
func ReviewConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = ReviewQPS, ReviewBurst, nil
	return c
}

// reviewedFilter is controller-runtime's authentication and authorization filter with its
// reviews sent through reviewCfg's client (not the manager's, whose budget is the jobs'),
// at most MaxReviewsInFlight requests past it at once, and a bearer token that is not a JWT
// (ServiceAccount and OIDC tokens are) refused with 401 before any review.
func reviewedFilter(reviewCfg *rest.Config) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(managerCfg *rest.Config, managerClient *http.Client) (metricsserver.Filter, error) {
		cfg, httpClient := managerCfg, managerClient
		if reviewCfg != nil {
			var err error
			cfg = reviewCfg
			if httpClient, err = rest.HTTPClientFor(reviewCfg); err != nil {
				return nil, err
			}
		}
		reviewed, err := filters.WithAuthenticationAndAuthorization(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		inFlight := make(chan struct{}, MaxReviewsInFlight)
		return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
			next, err := reviewed(log, handler)
			if err != nil {
				return nil, err
			}
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if !IsJWT(BearerToken(req)) {
					http.Error(w, "Unauthorized", http.StatusUnauthorized)
					return
				}
				select {
				case inFlight <- struct{}{}:
					defer func() { <-inFlight }()
					next.ServeHTTP(w, req)
				default:
					w.Header().Set("Retry-After", "1")
					http.Error(w, "too many requests under review", http.StatusTooManyRequests)
				}
			}), nil
		}, nil
	}
}

// BearerToken is the request's bearer token, empty if it has none.
func BearerToken(req *http.Request) string {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// IsJWT says the token has a JWT's shape: three base64url parts, the first two not empty.
func IsJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	for _, p := range parts {
		if strings.ContainsFunc(p, notBase64URL) {
			return false
		}
	}
	return true
}

// notBase64URL says c is outside base64url's alphabet (RFC 4648, section 5).
func notBase64URL(c rune) bool {
	return (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_'
}
