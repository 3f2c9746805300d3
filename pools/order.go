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

// idleQueue is the round-robin order of the idle connections whose seats
// in puddle wait empty (see the package documentation, "Reuse order"): a
// first-in, first-out ring. It is not safe for concurrent use; the pool
// guards it with idleMu.
type idleQueue[T Conn] struct {
	buf  []*entry[T]
	head int // index of the first entry in buf
	n    int // entries queued
}

// push queues e last.
func (q *idleQueue[T]) push(e *entry[T]) {
	if q.n == len(q.buf) {
		next := make([]*entry[T], max(8, 2*len(q.buf)))
		for i := range q.n {
			next[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = next, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = e
	q.n++
}

// pop takes the first entry, or returns nil when the queue is empty.
func (q *idleQueue[T]) pop() *entry[T] {
	if q.n == 0 {
		return nil
	}
	e := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return e
}

// removeFirst takes out, in queue order, up to max entries for which drop
// returns true (it is asked about each entry in turn until max are taken),
// keeping the order of the rest.
func (q *idleQueue[T]) removeFirst(limit int, drop func(*entry[T]) bool) []*entry[T] {
	var out []*entry[T]
	kept := 0
	for i := range q.n {
		at := (q.head + i) % len(q.buf)
		e := q.buf[at]
		q.buf[at] = nil
		if len(out) < limit && drop(e) {
			out = append(out, e)
			continue
		}
		q.buf[(q.head+kept)%len(q.buf)] = e
		kept++
	}
	q.n = kept
	return out
}
