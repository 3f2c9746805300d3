//go:build linux

package mariadbtest

import "syscall"

// sysProcAttr puts mariadbd in its own process group (a terminal's Ctrl-C
// goes to the test binary, which then stops the server in order) and asks
// the kernel to SIGKILL it if the test binary dies first.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go
// runtime only ends a thread when a goroutine locked to it with
// runtime.LockOSThread returns without unlocking, which this package never
// does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
