package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// logClientGo sends what client-go logs through klog (a watch's error, client-side throttling)
// to w as the agent's own lines, "<prefix>: message key=value ...", instead of klog's text
// with its header. Only klog's default verbosity (0) is logged.
func logClientGo(w io.Writer, prefix string) {
	klog.SetLoggerWithOptions(logr.New(&lineSink{w: w, prefix: prefix}), klog.ContextualLogger(true))
}

// lineSink writes each entry of level 0 as one line.
type lineSink struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	values []any
}

func (s *lineSink) Init(logr.RuntimeInfo) {
	if s.mu == nil {
		s.mu = &sync.Mutex{}
	}
}

func (s *lineSink) Enabled(level int) bool { return level == 0 }

func (s *lineSink) Info(_ int, msg string, kv ...any) { s.write(msg, nil, kv) }

func (s *lineSink) Error(err error, msg string, kv ...any) { s.write(msg, err, kv) }

func (s *lineSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any(nil), s.values...), kv...)
	return &c
}

func (s *lineSink) WithName(name string) logr.LogSink {
	c := *s
	c.prefix = s.prefix + ": " + name
	return &c
}

func (s *lineSink) write(msg string, err error, kv []any) {
	var b strings.Builder
	b.WriteString(s.prefix + ": " + strings.TrimSuffix(msg, "\n"))
	if err != nil {
		fmt.Fprintf(&b, ": %v", err)
	}
	all := append(append([]any(nil), s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		fmt.Fprintf(&b, " %v=%q", all[i], fmt.Sprint(all[i+1]))
	}
	b.WriteByte('\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, b.String())
}
