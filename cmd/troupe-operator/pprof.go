package main

import (
	"fmt"
	"net"
)

// checkPprofAddress refuses a --pprof-bind-address off loopback: the profiles show the
// operator's memory (Secrets' metadata, every job's spec) to whoever reaches the port, with no
// authentication. Empty (off) and "0" are fine; reach a loopback port with kubectl
// port-forward.
func checkPprofAddress(addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--pprof-bind-address %q: the profiles are served without authentication; bind them to loopback (127.0.0.1:PORT) and use kubectl port-forward", addr)
	}
	return nil
}
