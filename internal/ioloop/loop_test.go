//go:build linux

package ioloop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newLoop starts a loop for the test and closes it at the end.
func newLoop(t *testing.T, cfg Config) *Loop {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// pair returns two ends of a loopback TCP connection.
func pair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := <-acc
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// withFD runs fn with c's descriptor held open (the way callers must use
// a task's I/O: inside a RawConn callback).
func withFD(t *testing.T, c *net.TCPConn, fn func(fd int)) {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Error(err)
		return
	}
	if err := rc.Read(func(fd uintptr) bool { fn(int(fd)); return true }); err != nil {
		t.Error(err)
	}
}

// run starts fn as a task and returns a channel closed when it returns.
func run(t *testing.T, l *Loop, fn func(*Task)) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	if err := l.Go(func(tk *Task) { defer close(done); fn(tk) }); err != nil {
		t.Fatal(err)
	}
	return done
}

// TestEcho runs an echo server of many tasks on one loop with a small
// ring (submissions are made mid-run when it fills) and checks every
// answer of many concurrent clients.
func TestEcho(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			testEcho(t, newLoop(t, Config{Entries: 8, HoldProcessor: hold}))
		})
	}
}

func testEcho(t *testing.T, l *Loop) {
	const clients, rounds = 40, 200
	var wg sync.WaitGroup
	for i := range clients {
		c, s := pair(t)
		run(t, l, func(tk *Task) {
			withFD(t, s, func(fd int) {
				buf := make([]byte, 64)
				for {
					n, err := tk.Recv(fd, buf, time.Time{})
					if err != nil || n == 0 {
						return
					}
					if _, err := tk.Send(fd, buf[:n], time.Time{}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseWrite()
			want := []byte{byte(i), 0, 0, 0}
			got := make([]byte, 4)
			for r := range rounds {
				want[1], want[2] = byte(r), byte(r>>8)
				if _, err := c.Write(want); err != nil {
					t.Error(err)
					return
				}
				if _, err := io.ReadFull(c, got); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, want) {
					t.Errorf("client %d round %d: got %v, want %v", i, r, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSendRecv sends a command and reads its answer in one submission.
func TestSendRecv(t *testing.T) {
	l := newLoop(t, Config{})
	c, s := pair(t)
	go func() { // the peer answers each 5-byte command with its reverse
		b := make([]byte, 5)
		for {
			if _, err := io.ReadFull(s, b); err != nil {
				return
			}
			for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
			if _, err := s.Write(b); err != nil {
				return
			}
		}
	}()
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			in := make([]byte, 16)
			for range 100 {
				sent, n, err := tk.SendRecv(fd, []byte("hello"), in, time.Time{})
				if err != nil || sent != 5 {
					t.Errorf("SendRecv: sent %d, %v", sent, err)
					return
				}
				for n < 5 { // an answer may arrive in parts
					m, err := tk.Recv(fd, in[n:], time.Time{})
					if err != nil || m == 0 {
						t.Errorf("Recv: %d, %v", m, err)
						return
					}
					n += m
				}
				if string(in[:n]) != "olleh" {
					t.Errorf("answer %q, want olleh", in[:n])
					return
				}
			}
		})
	})
}

// TestLargeSend writes more than the socket buffers hold to a slow reader:
// the send waits for room and everything arrives in order.
func TestLargeSend(t *testing.T) {
	l := newLoop(t, Config{})
	c, s := pair(t)
	out := make([]byte, 8<<20)
	for i := range out {
		out[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		time.Sleep(50 * time.Millisecond) // let the socket buffers fill
		_, _ = io.Copy(&b, s)
		got <- b.Bytes()
	}()
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			n, err := tk.Send(fd, out, time.Time{})
			if err != nil || n != len(out) {
				t.Errorf("Send: %d, %v", n, err)
			}
		})
		_ = c.CloseWrite()
	})
	if b := <-got; !bytes.Equal(b, out) {
		t.Errorf("received %d bytes, not the %d sent", len(b), len(out))
	}
}

// TestTrySend: a send that must not wait takes what fits and then fails
// with EAGAIN; a send with a deadline to a peer that does not read ends
// with ErrTimeout.
func TestTrySend(t *testing.T) {
	l := newLoop(t, Config{})
	c, _ := pair(t)
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			b := make([]byte, 1<<20)
			total := 0
			for range 1000 {
				n, err := tk.TrySend(fd, b)
				total += n
				if errors.Is(err, syscall.EAGAIN) {
					break
				}
				if err != nil || n == 0 {
					t.Errorf("TrySend: %d, %v", n, err)
					return
				}
			}
			if total == 0 || total >= 1000*len(b) {
				t.Errorf("TrySend took %d bytes before EAGAIN", total)
			}
			if _, err := tk.Send(fd, b, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrTimeout) {
				t.Errorf("Send to a full socket: %v, want ErrTimeout", err)
			}
		})
	})
}

// TestRecvDeadline: a receive from a silent peer ends with ErrTimeout, a
// deadline in the past at once, and the socket still works afterwards.
func TestRecvDeadline(t *testing.T) {
	l := newLoop(t, Config{})
	c, s := pair(t)
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			b := make([]byte, 8)
			if _, err := tk.Recv(fd, b, time.Now().Add(20*time.Millisecond)); !errors.Is(err, ErrTimeout) {
				t.Errorf("Recv from a silent peer: %v, want ErrTimeout", err)
			}
			if _, err := tk.Recv(fd, b, time.Now().Add(-time.Second)); !errors.Is(err, ErrTimeout) {
				t.Errorf("Recv past its deadline: %v, want ErrTimeout", err)
			}
			if _, err := s.Write([]byte("x")); err != nil {
				t.Error(err)
			}
			if n, err := tk.Recv(fd, b, time.Now().Add(time.Minute)); err != nil || n != 1 {
				t.Errorf("Recv after the timeouts: %d, %v", n, err)
			}
		})
	})
}

// TestInterrupt: another goroutine ends a task's receive.
func TestInterrupt(t *testing.T) {
	l := newLoop(t, Config{})
	c, _ := pair(t)
	started := make(chan *Task, 1)
	done := run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			started <- tk
			if _, err := tk.Recv(fd, make([]byte, 8), time.Time{}); !errors.Is(err, ErrCanceled) {
				t.Errorf("interrupted Recv: %v, want ErrCanceled", err)
			}
		})
	})
	tk := <-started
	// The task may not have queued its receive yet; interrupt until it
	// returns (an interrupt before the receive is lost, as documented).
	for {
		tk.Interrupt()
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestPeerClose: the peer's close ends a receive with 0, and a send to a
// reset connection fails with the system's error, not a panic.
func TestPeerClose(t *testing.T) {
	l := newLoop(t, Config{})
	c, s := pair(t)
	_ = s.Close()
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			if n, err := tk.Recv(fd, make([]byte, 8), time.Time{}); n != 0 || err != nil {
				t.Errorf("Recv after the peer closed: %d, %v, want 0, nil", n, err)
			}
			var err error
			for range 100 { // the first sends may still be accepted
				if _, err = tk.Send(fd, make([]byte, 1024), time.Time{}); err != nil {
					break
				}
			}
			var errno syscall.Errno
			if !errors.As(err, &errno) {
				t.Errorf("Send to a closed peer: %v, want a system error", err)
			}
		})
	})
}

// TestOffload: a task waiting in Offload holds up no other task of its
// loop.
func TestOffload(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%v", hold), func(t *testing.T) {
			testOffload(t, newLoop(t, Config{HoldProcessor: hold}))
		})
	}
}

func testOffload(t *testing.T, l *Loop) {
	release := make(chan struct{})
	var got int
	offloaded := run(t, l, func(tk *Task) {
		tk.Offload(func() { got = <-chanOf(release, 42) })
	})
	c, s := pair(t)
	<-run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			go func() { _, _ = s.Write([]byte("ping")) }()
			if n, err := tk.Recv(fd, make([]byte, 8), time.Time{}); err != nil || n == 0 {
				t.Errorf("Recv beside an offloaded task: %d, %v", n, err)
			}
		})
	})
	close(release)
	<-offloaded
	if got != 42 {
		t.Errorf("Offload's function did not run to its end before the task went on: got %d", got)
	}
}

// TestOffloadPanic: a panic in Offload's function is raised in its task,
// where the task's own recover sees it; the loop runs on.
func TestOffloadPanic(t *testing.T) {
	l := newLoop(t, Config{})
	var got any
	<-run(t, l, func(tk *Task) {
		defer func() { got = recover() }()
		tk.Offload(func() { panic("boom") })
	})
	p, ok := got.(*OffloadPanic)
	if !ok || p.Value != "boom" || len(p.Stack) == 0 {
		t.Fatalf("recovered %v, want an *OffloadPanic of boom with a stack", got)
	}
	<-run(t, l, func(*Task) {}) // the loop still runs tasks
}

// TestPark: a parked task resumes when a task of its loop wakes it (also
// one just woken itself, in the same round), when a goroutine does, when
// its deadline passes, and when the loop closes; a wake of a task that is
// not parked, or a second wake, does nothing.
func TestPark(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	defer l.Close()
	tasks := make(chan *Task, 3)
	var order []string // tasks of one loop run one at a time
	parker := func(name string, deadline time.Time, then func()) <-chan struct{} {
		return run(t, l, func(tk *Task) {
			tasks <- tk
			if err := tk.Park(deadline); err != nil {
				t.Error(err)
			}
			order = append(order, name)
			then()
		})
	}
	var b, c *Task
	// first, resumed from the loop's ready list, wakes the others (each
	// twice): second in the same round, third by cancelling its deadline.
	first := parker("first", time.Time{}, func() { b.Wake(); b.Wake(); c.Wake(); c.Wake() })
	second := parker("second", time.Time{}, func() {})
	third := parker("third", time.Now().Add(time.Minute), func() {})
	a := <-tasks // tasks start in order
	b, c = <-tasks, <-tasks
	<-run(t, l, func(*Task) { a.Wake() })
	<-first
	<-second
	<-third
	if fmt.Sprint(order) != "[first second third]" {
		t.Errorf("order %v", order)
	}

	// A goroutine's wake; the deadline; a wake of a task not parked.
	woken := make(chan *Task, 1)
	done := run(t, l, func(tk *Task) {
		woken <- tk
		if err := tk.Park(time.Time{}); err != nil {
			t.Error(err)
		}
		start := time.Now()
		if err := tk.Park(start.Add(20 * time.Millisecond)); err != nil {
			t.Error(err)
		}
		if waited := time.Since(start); waited < 20*time.Millisecond {
			t.Errorf("Park returned %v before its deadline", 20*time.Millisecond-waited)
		}
		tk.Wake() // not parked: nothing
		if err := tk.Park(time.Now().Add(-time.Second)); err != nil {
			t.Errorf("Park past its deadline: %v", err)
		}
	})
	(<-woken).WakeAsync()
	<-done

	// Close ends a Park; the next fails.
	closed := run(t, l, func(tk *Task) {
		woken <- tk
		if err := tk.Park(time.Time{}); err != nil {
			t.Errorf("Park ended by Close: %v", err)
		}
		if err := tk.Park(time.Time{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Park after Close: %v, want ErrClosed", err)
		}
	})
	<-woken
	l.Close()
	<-closed
}

// TestHoldProcessorLetsTheRuntimeRun: with one processor (GOMAXPROCS=1),
// held by a loop that waits in the kernel for a socket that stays
// silent, the rest of the program still runs: the runtime's preemption
// signal interrupts the wait and the loop yields. A garbage collection
// (which stops the world) completes, a goroutine gets to run, and an
// offloaded function runs and hands its result back.
func TestHoldProcessorLetsTheRuntimeRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l := newLoop(t, Config{HoldProcessor: true})
	c, s := pair(t)
	idle := run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			if n, err := tk.Recv(fd, make([]byte, 1), time.Time{}); err != nil || n != 0 {
				t.Errorf("the idle task's Recv: %d, %v; want the end of the stream", n, err)
			}
		})
	})
	time.Sleep(20 * time.Millisecond) // the loop is in its wait by now
	runtime.GC()
	ran := make(chan struct{})
	go close(ran)
	<-ran
	var got int
	<-run(t, l, func(tk *Task) { tk.Offload(func() { got = 7 }) })
	if got != 7 {
		t.Errorf("offloaded function's result: %d", got)
	}
	s.Close()
	<-idle
}

// chanOf returns a channel that yields v once release is closed.
func chanOf(release chan struct{}, v int) <-chan int {
	c := make(chan int, 1)
	go func() { <-release; c <- v }()
	return c
}

// TestClose: Close ends the tasks' pending operations, waits for the tasks
// and refuses new ones.
func TestClose(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	var wg sync.WaitGroup
	for range 10 {
		c, _ := pair(t)
		wg.Add(1)
		started := make(chan struct{})
		if err := l.Go(func(tk *Task) {
			defer wg.Done()
			withFD(t, c, func(fd int) {
				close(started)
				_, err := tk.Recv(fd, make([]byte, 8), time.Time{})
				if !errors.Is(err, ErrCanceled) && !errors.Is(err, ErrClosed) {
					t.Errorf("Recv during Close: %v", err)
				}
				if _, err := tk.Recv(fd, make([]byte, 8), time.Time{}); !errors.Is(err, ErrClosed) {
					t.Errorf("Recv after Close: %v, want ErrClosed", err)
				}
			})
		}); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	l.Close()
	wg.Wait()
	if err := l.Go(func(*Task) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Go after Close: %v, want ErrClosed", err)
	}
	l.Close() // a second Close returns
}

// TestCloseKeepsThread: a closed loop gives its thread back to the
// runtime instead of ending it. (A thread's end sends the children it
// forked their parent-death signal: a loop that ended on a thread that had
// started a process with SysProcAttr.Pdeathsig killed that process, a
// test's MariaDB for one.)
func TestCloseKeepsThread(t *testing.T) {
	// Several loops at once, so that some run on other threads than the
	// main one (which the runtime never ends).
	var loops []*Loop
	var tids []int
	for range 4 {
		l, err := New(Config{})
		if err != nil {
			t.Skipf("no io_uring here: %v", err)
		}
		loops = append(loops, l)
		got := make(chan int, 1)
		if err := l.Go(func(*Task) { got <- syscall.Gettid() }); err != nil {
			t.Fatal(err)
		}
		tids = append(tids, <-got)
	}
	for _, l := range loops {
		l.Close()
	}
	time.Sleep(50 * time.Millisecond) // an ending thread is gone by then
	checked := 0
	for _, tid := range tids {
		if tid == os.Getpid() {
			continue
		}
		checked++
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", os.Getpid(), tid)); err != nil {
			t.Errorf("a loop's thread ended with the loop: %v", err)
		}
	}
	if checked == 0 {
		t.Skip("every loop ran on the main thread")
	}
}

// TestStats: the counts say what the loop did.
func TestStats(t *testing.T) {
	l := newLoop(t, Config{})
	if st := l.Stats(); st.Tasks != 0 || st.Offloads != 0 {
		t.Fatalf("a new loop's stats: %+v", st)
	}
	c, s := pair(t)
	release := make(chan struct{})
	var during Stats
	reader := run(t, l, func(tk *Task) {
		withFD(t, c, func(fd int) {
			close(release)
			_, _ = tk.Recv(fd, make([]byte, 1), time.Time{})
		})
	})
	<-release
	<-run(t, l, func(tk *Task) {
		tk.Offload(func() {})
		during = l.Stats() // on the loop: the reader and this task run
	})
	_, _ = s.Write([]byte("x"))
	<-reader
	if during.Tasks != 2 {
		t.Errorf("tasks while two ran: %d", during.Tasks)
	}
	st := l.Stats()
	if st.Offloads != 1 || st.Enters == 0 || st.Completions == 0 {
		t.Errorf("stats after one offload and one read: %+v", st)
	}
}
