package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// countingProxy stands between an operator and the API server and counts the operator's
// requests by verb and resource. mpi-operator registers no client-go request metrics, so the
// bench counts every side's requests here, one way for all: what the client sent, before the
// server's flow control.
type countingProxy struct {
	addr   string
	server *http.Server
	mu     sync.Mutex
	counts map[string]int // "POST pods", "PUT mpijobs/status", ...
	// statusWrites are the operator's writes of an object's status, timed: what the status
	// lag is made of (statusLagParts).
	statusWrites []statusWrite
}

// statusWrite is one write of an object's status through the proxy: the object's name, when
// the operator sent it, when the server's answer came back, and the answer's code.
type statusWrite struct {
	name       string
	sent, done time.Time
	code       int
}

func startProxy(admin *rest.Config) (*countingProxy, error) {
	transport, err := rest.TransportFor(admin)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(admin.Host)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{addr: l.Addr().String(), counts: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
		// A watch the operator ends as it stops is no error worth printing.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				log.Printf("proxy: %s %s: %v", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		p.count(r, sw.code)
		p.timeStatusWrite(r, sent, sw.code)
	})}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

func (p *countingProxy) close() { _ = p.server.Close() }

// statusWriter remembers the response's status code; Unwrap lets the reverse proxy flush a
// watch's events through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// count adds the request; a write the server refused as a conflict (409: written from a stale
// copy) is counted under its own key as well.
func (p *countingProxy) count(r *http.Request, code int) {
	verb := r.Method
	if q := r.URL.Query(); verb == http.MethodGet && q.Get("watch") == "true" {
		verb = "WATCH"
		if q.Get("sendInitialEvents") == "true" {
			verb = "WATCHLIST" // a list streamed as a watch (client-go's WatchListClient)
		}
	}
	key := verb + " " + resourceOf(r.URL.Path)
	p.mu.Lock()
	p.counts[key]++
	if code == http.StatusConflict {
		p.counts["CONFLICT "+key]++
	}
	p.mu.Unlock()
}

// timeStatusWrite keeps a write (PUT or PATCH) of a status subresource with its times.
func (p *countingProxy) timeStatusWrite(r *http.Request, sent time.Time, code int) {
	if r.Method != http.MethodPut && r.Method != http.MethodPatch {
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-1] != "status" {
		return
	}
	w := statusWrite{name: parts[len(parts)-2], sent: sent, done: time.Now(), code: code}
	p.mu.Lock()
	p.statusWrites = append(p.statusWrites, w)
	p.mu.Unlock()
}

// reset forgets every count and timed status write, and returns the counts it had.
func (p *countingProxy) reset() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = map[string]int{}
	p.statusWrites = nil
	return c
}

// takeStatusWrites returns the timed status writes since the last reset or take, and forgets
// them.
func (p *countingProxy) takeStatusWrites() []statusWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.statusWrites
	p.statusWrites = nil
	return w
}

// resourceOf is the resource (with its subresource) a request path names:
// /api/v1/namespaces/ns/pods/name/status -> pods/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			return "namespaces"
		}
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// writeCounts are the writes among counts, split into events, leader-election leases and the
// rest, with the rest itemised ("POST pods 1800, ..."); conflicts are the writes (any) the
// server refused with 409.
type writeCounts struct {
	writes, events, leases, conflicts int
	detail                            string
	// reads are GETs and LISTs (not watches), the rest of what the client's rate limit is
	// spent on, itemised in readDetail.
	reads      int
	readDetail string
	// watchDetail itemises the watches opened ("WATCH pods 12, WATCHLIST pods 1"): an informer
	// opens one at its start and again after each that ends (client-go ends each after 5-10
	// minutes), and since client-go 1.35 (WatchListClient) its list of everything, at its start
	// or after a watch it could not resume, is a watch asking for the initial events
	// (WATCHLIST), which delivers every object again.
	watchDetail string
}

func splitWrites(counts map[string]int) writeCounts {
	var w writeCounts
	var items, reads, watches []string
	for key, n := range counts {
		verb, res, _ := strings.Cut(key, " ")
		switch verb {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		case "CONFLICT":
			w.conflicts += n
			continue
		case "WATCH", "WATCHLIST":
			watches = append(watches, fmt.Sprintf("%s %d", key, n))
			continue
		case http.MethodGet:
			w.reads += n
			reads = append(reads, fmt.Sprintf("%s %d", key, n))
			continue
		default:
			continue
		}
		switch res {
		case "events":
			w.events += n
		case "leases":
			w.leases += n
		default:
			w.writes += n
			items = append(items, fmt.Sprintf("%s %d", key, n))
		}
	}
	sort.Strings(items)
	sort.Strings(reads)
	sort.Strings(watches)
	w.detail = strings.Join(items, ", ")
	w.readDetail = strings.Join(reads, ", ")
	w.watchDetail = strings.Join(watches, ", ")
	return w
}
