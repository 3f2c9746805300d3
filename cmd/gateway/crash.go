package main

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// crashPointEnv names the environment variable of the tests' crash hook:
// "POINT" or "POINT:N" makes the gateway exit (status 86, without
// cleaning up, as a SIGKILL would leave things) the Nth time a twopc
// commit reaches POINT (before_prepare, after_prepare, after_log,
// between_commits). Unset, as in every normal run: no hook.
const crashPointEnv = "DIRECTGATE_CRASH_POINT"

// crashExit is the exit status of a crash at a test's point.
const crashExit = 86

// crashHook builds the hook the value spec of crashPointEnv asks for, or
// nil.
func crashHook(spec string, log hclog.Logger) func(point string) {
	if spec == "" {
		return nil
	}
	point, nth, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 {
		n = 1
	}
	log.Warn("test crash hook armed: the gateway exits at a twopc commit point", "point", point, "nth", n)
	var reached atomic.Int64
	return func(p string) {
		if p == point && reached.Add(1) == int64(n) {
			os.Exit(crashExit)
		}
	}
}
