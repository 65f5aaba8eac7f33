package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with its name and the line: a replica's webhook port.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = fmt.Fprintf(c, "%s:%s", name, line)
			}()
		}
	}()
	return l.Addr().String()
}

func ask(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// The forwarder sends a connection to a live replica only, and refuses it when none lives, as a
// Service does with its endpoints.
func TestForwarderReachesOnlyLiveReplicas(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{listener: l}
	go f.forward()
	t.Cleanup(func() { _ = l.Close() })

	dead := &replica{hooks: echoServer(t, "dead"), done: make(chan struct{})}
	close(dead.done)
	live := &replica{hooks: echoServer(t, "live"), done: make(chan struct{})}
	f.replicas = []*replica{dead, live}
	for range 10 {
		got, err := ask(t, l.Addr().String())
		if err != nil || got != "live:ping\n" {
			t.Fatalf("answer %q, %v; want live:ping from the live replica", got, err)
		}
	}
	f.mu.Lock()
	f.replicas = []*replica{dead}
	f.mu.Unlock()
	if got, err := ask(t, l.Addr().String()); err == nil && got != "" {
		t.Fatalf("answered %q with no live replica", got)
	}
}

// The lines printed around a slow restore are the replicas' lines of that span that name the
// job, report an error or tell of the lease.
func TestLinesAbout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operator-01.log")
	log := strings.Join([]string{
		`{"level":"info","ts":"2026-11-27T10:15:09Z","msg":"before","MPIJob":{"name":"a","namespace":"n"}}`,
		`{"level":"info","ts":"2026-11-27T10:15:11Z","msg":"pass","MPIJob":{"name":"a","namespace":"n"}}`,
		`{"level":"info","ts":"2026-11-27T10:15:12Z","msg":"pass","MPIJob":{"name":"ab","namespace":"n"}}`,
		`{"level":"error","ts":"2026-11-27T10:15:13Z","msg":"failed"}`,
		`{"level":"info","ts":"2026-11-27T10:15:13Z","msg":"successfully renewed lease"}`,
		`not json`,
		`{"level":"info","ts":"2026-11-27T10:15:20Z","msg":"after","MPIJob":{"name":"a","namespace":"n"}}`,
	}, "\n")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fleet{logs: []string{path}}
	at := func(s int) time.Time { return time.Date(2026, 11, 27, 10, 15, s, 500_000_000, time.UTC) }
	got := f.linesAbout("a", at(11), at(14))
	var msgs []string
	for _, l := range got {
		_, rest, _ := strings.Cut(l, `"msg":"`)
		msg, _, _ := strings.Cut(rest, `"`)
		msgs = append(msgs, msg)
	}
	if want := []string{"pass", "failed", "successfully renewed lease"}; !slices.Equal(msgs, want) {
		t.Errorf("lines = %q, want those of %q", got, want)
	}
}
