package gateway

import "syscall"

// errTooManyFiles is the accept error of a process out of descriptors,
// which passes when connections close.
var errTooManyFiles = syscall.EMFILE
