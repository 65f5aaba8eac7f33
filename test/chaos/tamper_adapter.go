package main

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/troupe-dev/troupe/test/chaos/tamper"
)

// The faulty run tampers through package tamper (test/chaos/tamper).
func init() { tampering = tamperPackage{} }

// tamperPackage adapts package tamper to the harness's tamperer.
type tamperPackage struct{}

func (tamperPackage) Actions(kind string) []string { return tamper.Actions(kind) }

func (tamperPackage) Do(ctx context.Context, c client.Client, t target, action string, timeout time.Duration) tamperResult {
	r := tamper.Do(ctx, c, tamper.Target(t), action, timeout)
	return tamperResult{Action: r.Action, Target: target(r.Target), Restored: r.Restored, RestoreTime: r.RestoreTime, Err: r.Err}
}

func (tamperPackage) PreCreateForeign(ctx context.Context, c client.Client, t target) (func(context.Context) error, error) {
	return tamper.PreCreateForeign(ctx, c, tamper.Target(t))
}

func (tamperPackage) WebhookDown(ctx context.Context, c client.Client, badDir string) (int, int, error) {
	return tamper.WebhookDown(ctx, c, badDir)
}
