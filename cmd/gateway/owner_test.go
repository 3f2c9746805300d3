package main

import "testing"

// An elected owner advertises the address gateways dial: never all
// interfaces, never port 0.
func TestCheckAdvertise(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:15307": true,
		"owner-a:15307":   true,
		"[::1]:15307":     true,
		"0.0.0.0:15307":   false,
		"[::]:15307":      false,
		":15307":          false,
		"127.0.0.1:0":     false,
		"127.0.0.1":       false,
	} {
		if err := checkAdvertise(addr); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", addr, err, ok)
		}
	}
}
