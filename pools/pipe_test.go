package pools

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// wireSim is a connection's two directions for the pipe tests: requests
// written go to reqs, and a server goroutine answers each, in order, on
// answers.
type wireSim struct {
	reqs    chan int
	answers chan int
}

func newWireSim(t *testing.T) *wireSim {
	w := &wireSim{reqs: make(chan int, 1024), answers: make(chan int, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := range w.reqs {
			if rand.IntN(4) == 0 {
				time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
			}
			w.answers <- id
		}
	}()
	t.Cleanup(func() { close(w.reqs); <-done })
	return w
}

func pipeOf(t *testing.T) *Pipe[*fakeConn] {
	t.Helper()
	p := newPool(t, &dialer{}, nil)
	l, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Release)
	return NewPipe(l, time.Time{})
}

// TestPipeAnswersInOrder: callers that share a pipe each read their own
// answer, whatever the interleaving of their sends.
func TestPipeAnswersInOrder(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	const callers, each = 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			var turn Turn
			for i := range each {
				id := c*each + i
				if _, err := pipe.Send(&turn, time.Time{}, func(*fakeConn, bool) (bool, error) { w.reqs <- id; return false, nil }); err != nil {
					errs <- err
					return
				}
				if _, err := pipe.Wait(&turn); err != nil {
					errs <- err
					return
				}
				got := <-w.answers
				pipe.Done(&turn, true)
				if got != id {
					errs <- errors.New("a caller read another caller's answer")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if d := pipe.Depth(); d != 0 {
		t.Fatalf("depth %d after every turn ended", d)
	}
}

// TestPipePreludes: a request written behind another carries a prelude
// answering for the turn before; that turn reads it when it wants it
// (TakePrelude), otherwise the turn carrying it skips it, and every
// caller reads its own answer. A prelude's answer is -(id+1) of the
// request written before it.
func TestPipePreludes(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	const callers, each = 16, 200
	lastID := -1 // the request written last: written under the pipe's lock
	var taken, skipped sync.Map
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			var turn Turn
			for i := range each {
				id := c*each + i
				_, err := pipe.Send(&turn, time.Time{}, func(_ *fakeConn, behind bool) (bool, error) {
					if behind {
						w.reqs <- -(lastID + 1)
					}
					w.reqs <- id
					lastID = id
					return behind, nil
				})
				if err != nil {
					errs <- err
					return
				}
				if _, err := pipe.Wait(&turn); err != nil {
					pipe.Done(&turn, false)
					errs <- err
					return
				}
				if turn.PreludeLeft() {
					p := <-w.answers
					if p >= 0 {
						pipe.Done(&turn, false) // the turns behind fail rather than wait
						errs <- errors.New("a caller read an answer where its prelude was")
						return
					}
					skipped.Store(p, true)
				}
				if got := <-w.answers; got != id {
					pipe.Done(&turn, false)
					errs <- errors.New("a caller read another caller's answer")
					return
				}
				if id%2 == 0 {
					_, err := pipe.TakePrelude(&turn, func(*fakeConn) error {
						if p := <-w.answers; p != -(id + 1) {
							return errors.New("a caller took a prelude not its own")
						}
						taken.Store(id, true)
						return nil
					})
					if err != nil {
						pipe.Done(&turn, false)
						errs <- err
						return
					}
				}
				pipe.Done(&turn, true)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, m := 0, 0
	taken.Range(func(any, any) bool { n++; return true })
	skipped.Range(func(any, any) bool { m++; return true })
	if n == 0 || m == 0 {
		t.Fatalf("%d preludes taken, %d skipped: the test did not exercise both", n, m)
	}
}

// sendTurn sends a request of id on pipe and returns its turn.
func sendTurn(t *testing.T, pipe *Pipe[*fakeConn], w *wireSim, id int) *Turn {
	t.Helper()
	turn := new(Turn)
	if dead, err := pipe.Send(turn, time.Time{}, func(*fakeConn, bool) (bool, error) { w.reqs <- id; return false, nil }); err != nil || dead {
		t.Fatalf("send %d: dead %v, %v", id, dead, err)
	}
	return turn
}

// TestPipeBrokenByUnreadAnswer: a turn that leaves its answer unread
// fails every turn behind it and every later send; the last to end
// reports the pipe dead, once.
func TestPipeBrokenByUnreadAnswer(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	first, second, third := sendTurn(t, pipe, w, 1), sendTurn(t, pipe, w, 2), sendTurn(t, pipe, w, 3)
	if _, err := pipe.Wait(first); err != nil {
		t.Fatal(err)
	}
	if dead := pipe.Done(first, false); dead { // its answer left unread
		t.Fatal("dead with two turns outstanding")
	}
	if _, err := pipe.Send(new(Turn), time.Time{}, func(*fakeConn, bool) (bool, error) { t.Fatal("write on a broken pipe"); return false, nil }); !errors.Is(err, ErrPipeBroken) {
		t.Fatalf("send on a broken pipe: %v", err)
	}
	for i, turn := range []*Turn{second, third} {
		if _, err := pipe.Wait(turn); !errors.Is(err, ErrPipeBroken) {
			t.Fatalf("turn %d behind the break: %v", i+2, err)
		}
		if dead := pipe.Done(turn, false); dead != (i == 1) {
			t.Fatalf("turn %d: dead %v", i+2, dead)
		}
	}
	if !pipe.Broken() {
		t.Fatal("not broken")
	}
	if dead := pipe.Retire(); dead {
		t.Fatal("dead reported twice")
	}
}

// TestPipeWriteFailure: a failed write breaks the pipe; a turn sent
// before it still reads its answer, and ends the pipe.
func TestPipeWriteFailure(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	first := sendTurn(t, pipe, w, 1)
	boom := errors.New("write failed")
	if dead, err := pipe.Send(new(Turn), time.Time{}, func(*fakeConn, bool) (bool, error) { return false, boom }); !errors.Is(err, boom) || dead {
		t.Fatalf("failed write: dead %v, %v", dead, err)
	}
	if _, err := pipe.Wait(first); err != nil {
		t.Fatalf("the turn before the failed write: %v", err)
	}
	if got := <-w.answers; got != 1 {
		t.Fatalf("answer %d", got)
	}
	if dead := pipe.Done(first, true); !dead {
		t.Fatal("the last turn of a broken pipe did not report it dead")
	}
	if dead, err := pipe.Send(new(Turn), time.Time{}, func(*fakeConn, bool) (bool, error) { return false, boom }); !errors.Is(err, ErrPipeBroken) || dead {
		t.Fatalf("send after the failure: dead %v, %v", dead, err)
	}
	// A failed write on an idle pipe reports it dead at once.
	idle := pipeOf(t)
	if dead, err := idle.Send(new(Turn), time.Time{}, func(*fakeConn, bool) (bool, error) { return false, boom }); !dead || !errors.Is(err, boom) {
		t.Fatalf("failed write on an idle pipe: dead %v, %v", dead, err)
	}
}

// TestPipeRetire: a retired pipe refuses sends, lets its outstanding
// turns finish and reports dead with the last.
func TestPipeRetire(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	turn := sendTurn(t, pipe, w, 1)
	if dead := pipe.Retire(); dead {
		t.Fatal("dead with a turn outstanding")
	}
	if _, err := pipe.Send(new(Turn), time.Time{}, func(*fakeConn, bool) (bool, error) { return false, nil }); !errors.Is(err, ErrPipeRetired) {
		t.Fatalf("send on a retired pipe: %v", err)
	}
	if _, err := pipe.Wait(turn); err != nil {
		t.Fatal(err)
	}
	<-w.answers
	if dead := pipe.Done(turn, true); !dead || pipe.Broken() {
		t.Fatalf("last turn of a retired pipe: dead %v, broken %v", dead, pipe.Broken())
	}
	if dead := pipeOf(t).Retire(); !dead {
		t.Fatal("an idle pipe retired is not dead at once")
	}
}

// TestPipeAlone: Alone runs only for the newest turn, and holds off
// sends while it runs.
func TestPipeAlone(t *testing.T) {
	pipe, w := pipeOf(t), newWireSim(t)
	first := sendTurn(t, pipe, w, 1)
	if _, err := pipe.Wait(first); err != nil {
		t.Fatal(err)
	}
	<-w.answers
	sent := make(chan struct{})
	ran, err := pipe.Alone(first, func(*fakeConn) error {
		go func() {
			sendTurn(t, pipe, w, 2) // waits for Alone to end
			close(sent)
		}()
		select {
		case <-sent:
			t.Error("a send went through while Alone ran")
		case <-time.After(20 * time.Millisecond):
		}
		return nil
	})
	if !ran || err != nil {
		t.Fatalf("Alone on the newest turn: ran %v, %v", ran, err)
	}
	<-sent
	if ran, _ := pipe.Alone(first, func(*fakeConn) error { t.Error("ran with a turn behind"); return nil }); ran {
		t.Fatal("Alone ran with a turn queued behind")
	}
	pipe.Done(first, true)
}

// TestPipeBusy: a pipe is late while its oldest outstanding request was
// written longer ago than the bound; the next one's write time counts once
// the oldest is done, and an idle pipe is never late.
func TestPipeBusy(t *testing.T) {
	pipe := pipeOf(t)
	t0 := time.Unix(1000, 0)
	write := func(*fakeConn, bool) (bool, error) { return false, nil }
	a, b := new(Turn), new(Turn)
	for i, turn := range []*Turn{a, b} {
		if _, err := pipe.Send(turn, t0.Add(time.Duration(i)*10*time.Millisecond), write); err != nil {
			t.Fatal(err)
		}
	}
	const late = 5 * time.Millisecond
	busy := func(at time.Time) bool { b, _ := pipe.Busy(at, late); return b }
	if busy(t0.Add(4*time.Millisecond)) || !busy(t0.Add(6*time.Millisecond)) {
		t.Fatal("the first request's age does not decide")
	}
	if _, err := pipe.Wait(a); err != nil {
		t.Fatal(err)
	}
	pipe.Done(a, true)
	if busy(t0.Add(14*time.Millisecond)) || !busy(t0.Add(16*time.Millisecond)) {
		t.Fatal("once the first is done, the second request's age does not decide")
	}
	if _, err := pipe.Wait(b); err != nil {
		t.Fatal(err)
	}
	pipe.Done(b, true)
	if busy(t0.Add(time.Hour)) {
		t.Fatal("an idle pipe is late")
	}
}

// TestPipeIdleCheck: the check runs only on a pipe with nothing
// outstanding and nothing written for longer than the bound; a pipe found
// closed is reported dead once and takes no more requests.
func TestPipeIdleCheck(t *testing.T) {
	pipe := pipeOf(t)
	t0 := time.Unix(1000, 0)
	write := func(*fakeConn, bool) (bool, error) { return false, nil }
	checks := 0
	closed := func(*fakeConn) bool { checks++; return true }
	turn := new(Turn)
	if _, err := pipe.Send(turn, t0, write); err != nil {
		t.Fatal(err)
	}
	if pipe.IdleCheck(t0.Add(time.Hour), time.Millisecond, closed) || checks != 0 {
		t.Fatal("checked a pipe with a request outstanding")
	}
	if _, err := pipe.Wait(turn); err != nil {
		t.Fatal(err)
	}
	pipe.Done(turn, true)
	if pipe.IdleCheck(t0.Add(time.Millisecond/2), time.Millisecond, closed) || checks != 0 {
		t.Fatal("checked a pipe written to within the bound")
	}
	if !pipe.IdleCheck(t0.Add(2*time.Millisecond), time.Millisecond, closed) || checks != 1 || !pipe.Broken() {
		t.Fatal("a pipe found closed is not reported dead and broken")
	}
	if pipe.IdleCheck(t0.Add(time.Hour), time.Millisecond, closed) {
		t.Fatal("dead reported twice")
	}
	if _, err := pipe.Send(new(Turn), t0.Add(time.Hour), write); !errors.Is(err, ErrPipeBroken) {
		t.Fatalf("send on a pipe found closed: %v", err)
	}
}
