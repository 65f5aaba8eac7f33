package testing

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every interval until it returns true, failing t after timeout with the
// last error cond returned, which explains the failure. The test suites bind their own
// interval and timeout.
func Eventually(t *testing.T, what string, interval, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // keep polling; the last error explains a timeout
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
	}
}

// WaitReady polls an operator's health probe address (host:port) every interval until its
// /readyz answers 200 OK, or timeout passes.
func WaitReady(probe string, interval, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}
