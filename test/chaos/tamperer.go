package main

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tamperer is what the harness needs of package test/chaos/tamper (written beside this
// harness): tamper with a running job's children and wait for the operator to restore them,
// put a foreign object where a job's child will be, and create the bad-spec corpus while the
// webhooks are down.
type tamperer interface {
	// Actions are the tamperings the operator restores for a job of kind.
	Actions(kind string) []string
	// Do tampers with one child of the target and waits up to timeout for the restore.
	Do(ctx context.Context, c client.Client, t target, action string, timeout time.Duration) tamperResult
	// PreCreateForeign creates a foreign object with a child's name before the job exists;
	// release checks it was left untouched and deletes it.
	PreCreateForeign(ctx context.Context, c client.Client, t target) (release func(context.Context) error, err error)
	// WebhookDown creates every CEL-expressible bad spec of badDir with the webhooks down and
	// counts the API server's refusals.
	WebhookDown(ctx context.Context, c client.Client, badDir string) (refused, total int, err error)
}

// target and tamperResult mirror tamper.Target and tamper.Result.
type target struct{ Kind, Namespace, Name string }

type tamperResult struct {
	Action      string
	Target      target
	Restored    bool
	RestoreTime time.Duration
	Err         error
}

// tampering is the tamperer the faulty run uses: tamper_adapter.go sets it, in an init, to
// package tamper (test/chaos/tamper); noTamper (no tampering; the summary says so) is the
// fallback a build without that file gets.
var tampering tamperer = noTamper{}

// noTamper tampers with nothing.
type noTamper struct{}

func (noTamper) Actions(string) []string { return nil }

func (noTamper) Do(_ context.Context, _ client.Client, t target, action string, _ time.Duration) tamperResult {
	return tamperResult{Action: action, Target: t}
}

func (noTamper) PreCreateForeign(context.Context, client.Client, target) (func(context.Context) error, error) {
	return nil, nil
}

func (noTamper) WebhookDown(context.Context, client.Client, string) (int, int, error) {
	return 0, 0, nil
}
