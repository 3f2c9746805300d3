package ioloop

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The io_uring ABI (include/uapi/linux/io_uring.h), only what the loop
// uses.
const (
	sysIOUringSetup = 425
	sysIOUringEnter = 426

	setupCoopTaskrun  = 1 << 8
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13

	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1

	enterGetevents = 1 << 0

	sqeIOLink = 1 << 2

	opTimeout     = 11
	opAsyncCancel = 14
	opLinkTimeout = 15
	opRead        = 22
	opSend        = 26
	opRecv        = 27

	offSQRing = 0
	offSQEs   = 0x10000000
)

type sqRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type ringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sq                                                                     sqRingOffsets
	cq                                                                     cqRingOffsets
}

// sqe is a submission queue entry, 64 bytes.
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is a completion queue entry, 16 bytes.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// timespec is the kernel's __kernel_timespec.
type timespec struct{ sec, nsec int64 }

// ring is one io_uring, used by the one thread that made it (it is set up
// single-issuer with deferred task work: completions are made only inside
// that thread's io_uring_enter calls).
type ring struct {
	fd        int
	sqHead    *uint32
	sqTail    *uint32
	sqMask    uint32
	sqArray   []uint32
	sqes      []sqe
	cqHead    *uint32
	cqTail    *uint32
	cqMask    uint32
	cqes      []cqe
	localTail uint32 // SQEs written; *sqTail is published at enter
	queued    uint32 // SQEs written since the last enter
	mem       [][]byte
}

// newRing sets up an io_uring of entries submission slots on the calling
// thread, which must be locked to its goroutine and be the only one to use
// it.
func newRing(entries uint32) (*ring, error) {
	var p ringParams
	p.flags = setupSingleIssuer | setupDeferTaskrun | setupCoopTaskrun
	fd, _, errno := syscall.RawSyscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	if p.features&featSingleMmap == 0 || p.features&featNoDrop == 0 {
		r.close()
		return nil, fmt.Errorf("io_uring: the kernel lacks single-mmap rings or no-drop completions (features %#x)", p.features)
	}
	size := max(p.sq.array+p.sqEntries*4, p.cq.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	rings, err := syscall.Mmap(r.fd, offSQRing, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring: mapping the rings: %w", err)
	}
	r.mem = append(r.mem, rings)
	entriesMem, err := syscall.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring: mapping the submission entries: %w", err)
	}
	r.mem = append(r.mem, entriesMem)
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&rings[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(p.sq.head), u32(p.sq.tail), *u32(p.sq.ringMask)
	r.sqArray = unsafe.Slice(u32(p.sq.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&entriesMem[0])), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(p.cq.head), u32(p.cq.tail), *u32(p.cq.ringMask)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&rings[p.cq.cqes])), p.cqEntries)
	r.localTail = atomic.LoadUint32(r.sqTail)
	return r, nil
}

// close unmaps and closes the ring; the kernel cancels what is in flight.
func (r *ring) close() {
	for _, m := range r.mem {
		_ = syscall.Munmap(m)
	}
	r.mem = nil
	_ = syscall.Close(r.fd)
}

// reserve makes room for n SQEs written back to back (a linked chain must
// not be split by a submission between its entries).
func (r *ring) reserve(n uint32) {
	for uint32(len(r.sqes))-(r.localTail-atomic.LoadUint32(r.sqHead)) < n {
		r.enter(0, false)
	}
}

// next returns the next SQE, zeroed; reserve made room for it.
func (r *ring) next() *sqe {
	i := r.localTail & r.sqMask
	r.sqArray[i] = i
	s := &r.sqes[i]
	*s = sqe{}
	r.localTail++
	r.queued++
	return s
}

// prepIO writes an SQE for op on fd with buffer b.
func (r *ring) prepIO(op uint8, fd int, b []byte, opFlags uint32, userData uint64) *sqe {
	s := r.next()
	s.opcode, s.fd, s.opFlags, s.userData = op, int32(fd), opFlags, userData
	s.addr, s.len = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b))
	return s
}

// prepLinkTimeout writes a LINK_TIMEOUT for the SQE before it (which must
// carry sqeIOLink): it is cancelled when d passes first. ts must stay put
// until the next enter, which copies it.
func (r *ring) prepLinkTimeout(ts *timespec, d time.Duration, userData uint64) {
	*ts = timespec{sec: int64(d / time.Second), nsec: int64(d % time.Second)}
	s := r.next()
	s.opcode, s.fd, s.len, s.userData = opLinkTimeout, -1, 1, userData
	s.addr = uint64(uintptr(unsafe.Pointer(ts)))
}

// prepTimeout writes a TIMEOUT that completes when d has passed
// (-ETIME), unless cancelled first. ts must stay put until the next
// enter, which copies it.
func (r *ring) prepTimeout(ts *timespec, d time.Duration, userData uint64) {
	*ts = timespec{sec: int64(d / time.Second), nsec: int64(d % time.Second)}
	s := r.next()
	s.opcode, s.fd, s.len, s.userData = opTimeout, -1, 1, userData
	s.addr = uint64(uintptr(unsafe.Pointer(ts)))
}

// prepCancel writes an ASYNC_CANCEL of the request with target's user data.
func (r *ring) prepCancel(target, userData uint64) {
	s := r.next()
	s.opcode, s.fd, s.addr, s.userData = opAsyncCancel, -1, target, userData
}

// enter submits what is queued, runs the ring's deferred work and waits
// until at least wait completions are there. A call that waits is a
// system call the runtime knows may block (its processor goes to other
// goroutines meanwhile) unless hold; a call that does not wait, or holds
// the processor, is a raw system call.
func (r *ring) enter(wait uint32, hold bool) {
	atomic.StoreUint32(r.sqTail, r.localTail)
	for {
		var errno syscall.Errno
		if wait > 0 && !hold {
			_, _, errno = syscall.Syscall6(sysIOUringEnter, uintptr(r.fd), uintptr(r.queued), uintptr(wait), enterGetevents, 0, 0)
		} else {
			_, _, errno = syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(r.queued), uintptr(wait), enterGetevents, 0, 0)
		}
		switch errno {
		case 0:
			r.queued = 0
			return
		case syscall.EINTR:
			if hold {
				// Most likely the runtime's preemption signal: a
				// stop of the world for the garbage collector, or
				// sysmon finding this goroutine running for long.
				// Let the scheduler have the processor.
				runtime.Gosched()
			}
			continue
		case syscall.EBUSY, syscall.EAGAIN:
			// The completion queue is full: the caller reaps and
			// comes back. What was not submitted stays queued.
			r.queued = r.localTail - atomic.LoadUint32(r.sqHead)
			return
		}
		panic(fmt.Sprintf("ioloop: io_uring_enter: %v", errno))
	}
}

// reap calls fn for each completion there and reports how many there were.
func (r *ring) reap(fn func(userData uint64, res int32)) int {
	n := 0
	for {
		head, tail := atomic.LoadUint32(r.cqHead), atomic.LoadUint32(r.cqTail)
		if head == tail {
			return n
		}
		for ; head != tail; head++ {
			c := r.cqes[head&r.cqMask]
			atomic.StoreUint32(r.cqHead, head+1)
			fn(c.userData, c.res)
			n++
		}
	}
}
