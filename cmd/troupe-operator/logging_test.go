package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The debug line controller-runtime writes for each recorded event names the event's related
// object, which it passes as a *corev1.ObjectReference (nil when there is none): in the
// operator's JSON log it must read as the object's kind, namespace and name, not as an encoder
// error.
func TestEventLogLinesNameTheirObject(t *testing.T) {
	var buf bytes.Buffer
	log := withObjectReferences(zap.New(zap.WriteTo(&buf), zap.Level(zapcore.DebugLevel))).WithName("events")
	// As controller-runtime v0.23's event recorder logs an event, with and without a related object.
	sts := &corev1.ObjectReference{Kind: "StatefulSet", Namespace: "ml", Name: "train-workerset-ws0", APIVersion: "apps/v1"}
	log.V(1).Info("created StatefulSet train-workerset-ws0", "type", "Normal", "object", sts, "action", "Create", "reason", "Created")
	log.V(1).Info("the master Job is running", "type", "Normal", "object", (*corev1.ObjectReference)(nil), "action", "Run", "reason", "Running")
	log.WithValues("object", sts).Info("with values")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), buf.String())
	}
	want := []any{
		map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": "ml", "name": "train-workerset-ws0"},
		nil,
		map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": "ml", "name": "train-workerset-ws0"},
	}
	for i, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, line)
		}
		if e, ok := entry["objectError"]; ok {
			t.Errorf("line %d: objectError %q", i, e)
		}
		if diff := cmp.Diff(want[i], entry["object"]); diff != "" {
			t.Errorf("line %d: object (-want +got):\n%s", i, diff)
		}
		if entry["logger"] != "events" {
			t.Errorf("line %d: logger %v, want events", i, entry["logger"])
		}
	}
}

// The values given are not changed: the wrapper copies a list that holds a reference.
func TestReferencesCopies(t *testing.T) {
	ref := &corev1.ObjectReference{Kind: "Pod", Name: "p"}
	kv := []any{"object", ref, "n", 1}
	out := references(kv)
	if kv[1] != ref {
		t.Errorf("the caller's list was changed: %v", kv)
	}
	if diff := cmp.Diff([]any{"object", map[string]string{"kind": "Pod", "name": "p"}, "n", 1}, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	plain := []any{"n", 1}
	if got := references(plain); &got[0] != &plain[0] {
		t.Error("a list without references was copied")
	}
}
