// Package ioloop runs blocking-style code on io_uring event loops.
//
// A Loop is a goroutine locked to its OS thread that owns one io_uring. A
// Task is a function running on a loop as a coroutine (iter.Pull): its
// Recv, Send and SendRecv queue the operation on the loop's ring and
// switch back to the loop, which resumes the task when the operation
// completes. The code of a task reads like the code of a goroutine doing
// blocking I/O, but the loop submits the operations of every task that
// ran since its last system call, and waits for the next completions, in
// one io_uring_enter: a proxy's tasks cost one system call per batch
// instead of one or two per read and write, and a switch between tasks is
// a coroutine switch on the same thread, not a trip through the runtime's
// scheduler and poller.
//
// Why coroutines and not a state machine per connection: the two cost the
// same per query (docs/benchmarks.md, "I/O models tried for the floor": a relay on one
// ring with a coroutine per direction against one with a state machine per
// direction), and coroutines keep the caller's one code path, written in
// blocking style, instead of cutting it at every wait.
//
// A task's only waits are its loop I/O. Anything else that may wait (a
// channel, a lock held long, a sleep, a blocking call on a socket not run
// through the task) stops the whole loop meanwhile, and deadlocks it when
// what it waits for is another task of the same loop; such a wait goes
// through Task.Offload, which runs it on a goroutine while the task alone
// waits.
//
// Linux only (io_uring with single-issuer rings and deferred task work,
// kernel 6.1 or later). New fails where the kernel refuses io_uring (too
// old, sysctl kernel.io_uring_disabled, a container's seccomp profile);
// callers then keep their goroutines.
package ioloop
