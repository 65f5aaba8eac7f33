package main

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

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
