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
	return NewPipe(l)
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
				if _, err := pipe.Send(&turn, func(*fakeConn) error { w.reqs <- id; return nil }); err != nil {
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

// sendTurn sends a request of id on pipe and returns its turn.
func sendTurn(t *testing.T, pipe *Pipe[*fakeConn], w *wireSim, id int) *Turn {
	t.Helper()
	turn := new(Turn)
	if dead, err := pipe.Send(turn, func(*fakeConn) error { w.reqs <- id; return nil }); err != nil || dead {
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
	if _, err := pipe.Send(new(Turn), func(*fakeConn) error { t.Fatal("write on a broken pipe"); return nil }); !errors.Is(err, ErrPipeBroken) {
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
	if dead, err := pipe.Send(new(Turn), func(*fakeConn) error { return boom }); !errors.Is(err, boom) || dead {
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
	if dead, err := pipe.Send(new(Turn), func(*fakeConn) error { return boom }); !errors.Is(err, ErrPipeBroken) || dead {
		t.Fatalf("send after the failure: dead %v, %v", dead, err)
	}
	// A failed write on an idle pipe reports it dead at once.
	idle := pipeOf(t)
	if dead, err := idle.Send(new(Turn), func(*fakeConn) error { return boom }); !dead || !errors.Is(err, boom) {
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
	if _, err := pipe.Send(new(Turn), func(*fakeConn) error { return nil }); !errors.Is(err, ErrPipeRetired) {
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
