package pools

import (
	"errors"
	"sync"
	"time"

	"github.com/jackc/puddle/v2"
)

// checkInterval is how often the maintenance loop runs.
func (p *Pool[T]) checkInterval() time.Duration {
	iv := maxCheckInterval
	if idle := p.idleTimeout(); idle > 0 {
		iv = min(iv, idle/2)
	}
	if life := p.maxLifetime(); life > 0 {
		iv = min(iv, life/4)
	}
	return max(iv, minCheckInterval)
}

// maintain is the pool's background loop: close expired and long-idle
// connections, dial up to MinIdle, move what retired generations hold
// idle; every checkInterval, and when kicked.
func (p *Pool[T]) maintain() {
	iv := p.checkInterval()
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		p.evict()
		p.fill()
		p.sweepRetired()
		select {
		case <-p.closec:
			return
		case <-t.C:
		case <-p.kick:
		}
		if next := p.checkInterval(); next != iv { // SetTimeouts changed it
			iv = next
			t.Reset(iv)
		}
	}
}

// evict passes once over the idle connections, as pgxpool does: it takes
// every idle seat from puddle (AcquireAllIdle), closes the connections
// past their lifetime, idle longer than IdleTimeout (while more than
// MinIdle are open) or over the budget, and gives the other seats back in
// the order they were taken, so that the reuse order stands. Under
// RoundRobin the queue is looked at from the connection idle longest, one
// empty seat closed per connection taken out of it.
func (p *Pool[T]) evict() {
	g := p.gen.Load()
	seats := g.pud.AcquireAllIdle()
	if len(seats) == 0 {
		return
	}
	st := g.pud.Stat()
	open := int(st.AcquiredResources() + st.IdleResources())
	p.mu.Lock()
	minIdle := p.minIdle
	p.mu.Unlock()
	now := time.Now()
	idle := p.idleTimeout()
	overBudget := p.budget != nil && p.budget.over.Load()
	goes := func(e *entry[T]) bool {
		switch {
		case e.expired(now), overBudget:
		case idle > 0 && now.Sub(e.idleSince) >= idle && open > minIdle:
		default:
			return false
		}
		open--
		return true
	}
	var empty []int // indexes in seats
	keep := make([]bool, len(seats))
	for i, res := range seats {
		l := res.Value()
		l.res = res
		switch {
		case l.e == nil:
			empty = append(empty, i)
			keep[i] = true
		case goes(l.e):
			p.discard(l)
		default:
			keep[i] = true
		}
	}
	if len(empty) > 0 {
		p.idleMu.Lock()
		gone := p.idle.removeFirst(len(empty), goes)
		p.idleMu.Unlock()
		for k, e := range gone {
			i := empty[k]
			seats[i].Value().e = e
			keep[i] = false
			p.discard(seats[i].Value())
		}
	}
	// AcquireAllIdle took the top of the stack first: given back from
	// the bottom, the seats stand as they stood.
	for i := len(seats) - 1; i >= 0; i-- {
		if keep[i] {
			seats[i].ReleaseUnused()
		}
	}
}

// fill dials, in the background, until MinIdle connections are open or
// being dialed, within the size, MaxDials and the budget; one round at a
// time. A failed dial is retried at the next tick.
func (p *Pool[T]) fill() {
	p.mu.Lock()
	minIdle := p.minIdle
	if p.closed.Load() || !p.filling.CompareAndSwap(false, true) {
		p.mu.Unlock()
		return
	}
	g := p.gen.Load()
	total := int(g.pud.Stat().TotalResources())
	n := min(minIdle-total, cap(p.dialTurns), g.size-total)
	if n <= 0 {
		p.filling.Store(false)
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	p.spawn("warm-up", func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range n {
			wg.Go(func() {
				err := g.pud.CreateResource(p.warm)
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !errors.Is(err, errBudgetSpent) && !errors.Is(err, puddle.ErrNotAvailable) {
					p.log.Debug("warm-up dial failed", "error", err)
				}
			})
		}
		wg.Wait()
		p.filling.Store(false)
		if ok == n {
			p.signalKick() // maybe more to dial
		}
	})
}
