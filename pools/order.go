package pools

import (
	"fmt"
	"time"
)

// Order is the order in which a pool hands out its idle connections.
type Order uint8

const (
	// RoundRobin hands out the connection idle longest (first in, first
	// out): every open connection is used in turn, so all of them stay
	// warm and none ages out under steady load, and a burst finds them
	// open. The zero Order.
	RoundRobin Order = iota
	// LIFO hands out the connection released last: a pool larger than its
	// load keeps using the same few connections (the server runs fewer
	// threads), and the others close after Config.IdleTimeout, so a burst
	// dials them again.
	LIFO
)

// String returns the configuration name of o: "round_robin" or "lifo".
func (o Order) String() string {
	switch o {
	case RoundRobin:
		return "round_robin"
	case LIFO:
		return "lifo"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// ParseOrder parses a configuration name of an Order: "round_robin" or
// "lifo" ("" is round_robin, the default).
func ParseOrder(s string) (Order, error) {
	switch s {
	case "", "round_robin":
		return RoundRobin, nil
	case "lifo":
		return LIFO, nil
	}
	return 0, fmt.Errorf("unknown pool order %q: use round_robin or lifo", s)
}

// entry is one connection of a pool with what the pool knows of it.
type entry[T Conn] struct {
	conn    T
	created time.Time
	// expires is the end of the connection's lifetime; zero: never.
	expires time.Time
	// idleSince is when the connection last went idle.
	idleSince time.Time
	// unsound is set when the connection is destroyed as broken or in an
	// unknown state: it is closed, never quit (see Quitter).
	unsound bool
}

// expired reports whether e is past its lifetime at now.
func (e *entry[T]) expired(now time.Time) bool {
	return !e.expires.IsZero() && !now.Before(e.expires)
}

// ring is a first-in, first-out queue: the round-robin order of the idle
// connections whose seats in puddle wait empty (see the package
// documentation, "Reuse order"), and the hand-off queue of waiters. It is
// not safe for concurrent use; the pool guards each with a mutex.
type ring[E comparable] struct {
	buf  []E
	head int // index of the first element in buf
	n    int // elements queued
}

// push queues x last.
func (q *ring[E]) push(x E) {
	if q.n == len(q.buf) {
		next := make([]E, max(8, 2*len(q.buf)))
		for i := range q.n {
			next[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = next, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = x
	q.n++
}

// pushFront queues x first.
func (q *ring[E]) pushFront(x E) {
	q.push(x) // makes room
	q.n--
	q.buf[(q.head+q.n)%len(q.buf)] = *new(E)
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = x
	q.n++
}

// pop takes the first element, or returns the zero E when the queue is
// empty.
func (q *ring[E]) pop() E {
	var zero E
	if q.n == 0 {
		return zero
	}
	x := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return x
}

// removeFirst takes out, in queue order, up to limit elements for which
// drop returns true (it is asked about each element in turn until limit
// are taken), keeping the order of the rest.
func (q *ring[E]) removeFirst(limit int, drop func(E) bool) []E {
	var out []E
	var zero E
	kept := 0
	for i := range q.n {
		at := (q.head + i) % len(q.buf)
		x := q.buf[at]
		q.buf[at] = zero
		if len(out) < limit && drop(x) {
			out = append(out, x)
			continue
		}
		q.buf[(q.head+kept)%len(q.buf)] = x
		kept++
	}
	q.n = kept
	return out
}
