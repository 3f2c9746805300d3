//go:build !linux && !windows

package mariadbtest

import "syscall"

// sysProcAttr puts mariadbd in its own process group, so a terminal's Ctrl-C
// goes to the test binary, which then stops the server in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
