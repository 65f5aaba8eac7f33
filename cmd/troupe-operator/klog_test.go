package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logLines sets the operator's logging up from the flags given, as run does, and returns what
// it printed once logged has run; klog is put back as it was when the test ends.
func logLines(t *testing.T, args []string, logged func()) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	opts := zap.Options{DestWriter: &buf}
	fs := flag.NewFlagSet("troupe-operator", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	setupLogging(&opts)
	t.Cleanup(func() {
		klog.ClearLogger()
		kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(kfs)
		_ = kfs.Set("v", "0")
	})
	logged()
	klog.Flush()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, line)
		}
		out = append(out, entry)
	}
	return out
}

// What client-go logs through klog (leader election's lease, a watch's error) comes out as the
// operator's own JSON lines, not as klog's text.
func TestKlogLinesAreJSON(t *testing.T) {
	lines := logLines(t, nil, func() {
		// As client-go's leader election and reflector log.
		klog.Infof("successfully acquired lease %v", "troupe-system/troupe-operator.troupe.dev")
		klog.InfoS("attempting to acquire leader lease", "lease", "troupe-system/troupe-operator.troupe.dev")
		klog.ErrorS(errors.New("connection refused"), "Failed to watch", "resource", "pods")
		klog.V(2).InfoS("routine, left out at the default level")
		klog.Background().WithName("reflector").Info("contextual", "n", 3)
	})
	type line struct{ Level, Msg, Logger, Lease, Resource, Error string }
	var got []line
	for _, e := range lines {
		s := func(k string) string { v, _ := e[k].(string); return v }
		if _, ok := e["ts"]; !ok {
			t.Errorf("line without a time: %v", e)
		}
		got = append(got, line{Level: s("level"), Msg: s("msg"), Logger: s("logger"), Lease: s("lease"),
			Resource: s("resource"), Error: s("error")})
	}
	want := []line{
		{Level: "info", Msg: "successfully acquired lease troupe-system/troupe-operator.troupe.dev"},
		{Level: "info", Msg: "attempting to acquire leader lease", Lease: "troupe-system/troupe-operator.troupe.dev"},
		{Level: "error", Msg: "Failed to watch", Resource: "pods", Error: "connection refused"},
		{Level: "info", Msg: "contextual", Logger: "reflector"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("klog's lines (-want +got):\n%s", diff)
	}
}

// --zap-log-level=2 lets klog's V(2) lines through too, and no V(3) line.
func TestKlogVerbosityFollowsTheLogLevel(t *testing.T) {
	lines := logLines(t, []string{"--zap-log-level=2"}, func() {
		klog.V(2).Info("two")
		klog.V(3).Info("three")
		klog.Background().V(2).Info("contextual two")
		klog.Background().V(3).Info("contextual three")
	})
	var got []string
	for _, e := range lines {
		got = append(got, e["msg"].(string))
	}
	if diff := cmp.Diff([]string{"two", "contextual two"}, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestVerbosity(t *testing.T) {
	level := func(l zapcore.Level) zapcore.LevelEnabler { return l }
	for _, tc := range []struct {
		name string
		opts zap.Options
		want int
	}{
		{"default", zap.Options{}, 0},
		{"devel", zap.Options{Development: true}, 1},
		{"info", zap.Options{Level: level(zapcore.InfoLevel)}, 0},
		{"error", zap.Options{Level: level(zapcore.ErrorLevel)}, 0},
		{"debug", zap.Options{Level: level(zapcore.DebugLevel)}, 1},
		{"5", zap.Options{Level: level(zapcore.Level(-5))}, 5},
	} {
		if got := verbosity(&tc.opts); got != tc.want {
			t.Errorf("%s: verbosity %d, want %d", tc.name, got, tc.want)
		}
	}
}
