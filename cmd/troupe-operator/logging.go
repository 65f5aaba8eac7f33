package main

import (
	"flag"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// setupLogging makes the one logger of the process from the --zap-* flags (JSON lines through
// zapr by default; --zap-devel: human-readable console output) and gives it to
// controller-runtime and to klog. client-go logs through klog (leader election's "Successfully
// acquired lease", a watch's errors, client-side throttling): without the second, those lines
// were klog's own text among the operator's JSON.
func setupLogging(opts *zap.Options) {
	l := withObjectReferences(zap.New(zap.UseFlagOptions(opts)))
	ctrl.SetLogger(l)
	// ContextualLogger: client-go code that takes its logger from a context or from
	// klog.Background gets this one as it is, its V levels included.
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true))
	// klog asks its own -v before it hands a klog.V(n) line on: the same verbosity as the
	// logger's, so that --zap-log-level=4 shows client-go's V(4) lines too and no more.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(verbosity(opts)))
}

// verbosity is the highest logr V level the options let through: 0 at the default info level,
// 1 at debug (--zap-devel's default), n at --zap-log-level=n.
func verbosity(opts *zap.Options) int {
	level := opts.Level
	if level == nil {
		if opts.Development {
			return 1
		}
		return 0
	}
	v := 0
	// zap's level of logr's V(n) is -n; the number levels go as low as zap's int8 allows.
	for v < 127 && level.Enabled(zapcore.Level(-v-1)) {
		v++
	}
	return v
}

// withObjectReferences returns l logging every *corev1.ObjectReference value by its API
// version, kind, namespace and name.
//
// controller-runtime v0.23 logs each event the operator records, at V(1), with the event's
// related object under "object": a *corev1.ObjectReference, nil when the event has none. Its
// zap encoder logs a Kubernetes object by its metadata, which a reference does not have, so
// each such line said "got runtime.Object without object metadata" (or "got nil for
// runtime.Object") instead of naming anything. controller-runtime v0.24 logs events otherwise
// (kubernetes-sigs/controller-runtime#3504), but needs the Kubernetes 1.36 libraries.
func withObjectReferences(l logr.Logger) logr.Logger {
	return logr.New(refSink{l.GetSink()})
}

// refSink passes everything on to the sink it wraps, with object references replaced.
type refSink struct{ logr.LogSink }

var _ logr.CallDepthLogSink = refSink{}

// Init counts refSink's own frame, so that the wrapped sink reports the caller's line.
func (s refSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	s.LogSink.Init(info)
}

func (s refSink) Info(level int, msg string, keysAndValues ...any) {
	s.LogSink.Info(level, msg, references(keysAndValues)...)
}

func (s refSink) Error(err error, msg string, keysAndValues ...any) {
	s.LogSink.Error(err, msg, references(keysAndValues)...)
}

func (s refSink) WithValues(keysAndValues ...any) logr.LogSink {
	return refSink{s.LogSink.WithValues(references(keysAndValues)...)}
}

func (s refSink) WithName(name string) logr.LogSink { return refSink{s.LogSink.WithName(name)} }

func (s refSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return refSink{d.WithCallDepth(depth)}
	}
	return s
}

// references returns keysAndValues with each *corev1.ObjectReference value replaced by its
// API version, kind, namespace and name (nil by nil); the slice is copied only when it holds one.
func references(keysAndValues []any) []any {
	out := keysAndValues
	for i := 1; i < len(keysAndValues); i += 2 {
		ref, ok := keysAndValues[i].(*corev1.ObjectReference)
		if !ok {
			continue
		}
		if &out[0] == &keysAndValues[0] {
			out = append([]any(nil), keysAndValues...)
		}
		if ref == nil {
			out[i] = nil
			continue
		}
		named := map[string]string{"kind": ref.Kind, "name": ref.Name}
		if ref.Namespace != "" {
			named["namespace"] = ref.Namespace
		}
		if ref.APIVersion != "" {
			named["apiVersion"] = ref.APIVersion
		}
		out[i] = named
	}
	return out
}
