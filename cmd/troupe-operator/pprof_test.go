package main

import "testing"

func TestPprofOnLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "0": true, "127.0.0.1:6060": true, "[::1]:6060": true, "localhost:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.0.0.5:6060": false, "[::]:6060": false, "6060": false,
	} {
		if err := checkPprofAddress(addr); (err == nil) != ok {
			t.Errorf("checkPprofAddress(%q) = %v, want accepted %t", addr, err, ok)
		}
	}
}
