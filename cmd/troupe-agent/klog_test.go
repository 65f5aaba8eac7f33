package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
)

// What client-go logs through klog comes out as the agent's own lines, without klog's header,
// and its routine (V(1) and up) lines not at all.
func TestClientGoLinesAreTheAgents(t *testing.T) {
	var buf bytes.Buffer
	logClientGo(&buf, "troupe-agent wait")
	t.Cleanup(klog.ClearLogger)
	klog.Infof("Waited for %s due to client-side throttling", "1.2s")
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "resource", "pods")
	klog.V(1).Info("routine")
	klog.Background().WithName("reflector").V(4).Info("routine too")
	klog.Background().WithName("reflector").WithValues("n", 2).Info("named")
	klog.Flush()
	want := `troupe-agent wait: Waited for 1.2s due to client-side throttling
troupe-agent wait: Failed to watch: connection refused resource="pods"
troupe-agent wait: reflector: named n="2"
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
