package difffuzz

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/directgate/directgate/wire"
)

// target is where a phase's clients connect.
type target struct {
	// name is "direct" or "gateway".
	name                 string
	addr, user, password string
}

// clientRun is what one client saw: the records of each step.
type clientRun struct {
	steps [][]record
	// loginErr is set when the main connection could not log in.
	loginErr error
}

// killWait bounds the wait for a StepKill statement to show up running.
const killWait = 5 * time.Second

// runPhase runs every script of r at once against t and returns what each
// client saw, in the order of r.Scripts.
//
// Through the gateway, a noise client runs alongside: statements that
// change what a connection holds for ROW_COUNT(), FOUND_ROWS(), SHOW
// WARNINGS and LAST_INSERT_ID(), as fast as the pool lets it. Any value
// the gateway takes from a connection instead of from the session then
// shows as a divergence.
func (e *Env) runPhase(ctx context.Context, r *Round, t target) []clientRun {
	runs := make([]clientRun, len(r.Scripts))
	var wg sync.WaitGroup
	for i := range r.Scripts {
		wg.Go(func() { runs[i] = e.runClient(ctx, t, &r.Scripts[i]) })
	}
	stop := make(chan struct{})
	var noise sync.WaitGroup
	if t.name == "gateway" {
		noise.Go(func() { runNoise(ctx, t, stop) })
	}
	wg.Wait()
	close(stop)
	noise.Wait()
	return runs
}

// noiseStatements leave different diagnostics on a connection from what
// any script's statements leave.
var noiseStatements = []string{
	"SELECT 7/0, 'noise', CAST('noise' AS SIGNED)",
	"SELECT LAST_INSERT_ID(987654)",
	"DO 0",
	"SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5",
}

// runNoise runs noiseStatements over t until stop closes, at most
// noiseMax statements.
func runNoise(ctx context.Context, t target, stop <-chan struct{}) {
	const noiseMax = 100_000
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	rc, err := dialRaw(dctx, dialConfig{addr: t.addr, user: t.user, password: t.password, caps: wire.CapDeprecateEOF})
	cancel()
	if err != nil {
		return
	}
	defer rc.quit()

	for i := 0; i < noiseMax; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
		if _, err := rc.query(noiseStatements[i%len(noiseStatements)]); err != nil {
			return
		}

	}
}

// clientState is a client's connections during a phase.
type clientState struct {
	e      *Env
	t      target
	s      *Script
	main   *rawConn
	side   *rawConn // straight to MariaDB, for StepObserve
	killer *rawConn // over t, for StepKill
	// handles are the statements kept by StepPrepare.
	handles map[int]*prepared
}

func (e *Env) runClient(ctx context.Context, t target, s *Script) clientRun {
	run := clientRun{steps: make([][]record, len(s.Steps))}
	cs := &clientState{e: e, t: t, s: s, handles: map[int]*prepared{}}
	defer cs.close()
	var err error
	cs.main, err = cs.dial(ctx, t.addr, t.user, t.password, s.Caps, s.Collation)
	if err != nil {
		run.loginErr = err
		for i := range run.steps {
			run.steps[i] = []record{failRecord(fmt.Errorf("login: %w", err))}
		}
		return run
	}
	dead := false
	for i, st := range s.Steps {
		if dead || ctx.Err() != nil {
			run.steps[i] = []record{{key: "not run: the connection is gone", text: "not run: the connection is gone"}}
			continue
		}
		if st.Pause > 0 {
			time.Sleep(st.Pause)
		}
		recs, err := cs.step(ctx, st)
		if err != nil {
			recs = append(recs, failRecord(err))
			dead = true
		}
		run.steps[i] = recs
	}
	return run
}

func (cs *clientState) dial(ctx context.Context, addr, user, password string, caps uint32, coll byte) (*rawConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return dialRaw(dctx, dialConfig{addr: addr, user: user, password: password, db: cs.s.DB(), caps: caps, collation: coll})
}

func (cs *clientState) close() {
	for _, c := range []*rawConn{cs.main, cs.side, cs.killer} {
		if c != nil {
			c.quit()
		}
	}
}

// step runs one step on the main connection. An error means the main
// connection is unusable; the records are what was seen before it.
func (cs *clientState) step(ctx context.Context, st Step) ([]record, error) {
	m := cs.main
	switch st.Kind {
	case StepQuery:
		return m.query(st.SQL)
	case StepInitDB:
		return m.initDB(st.SQL)
	case StepSetOption:
		return m.setOption(st.SQL == "on")
	case StepPrepared:
		ps, recs, err := m.prepare(st.SQL)
		if err != nil || ps == nil {
			return recs, err
		}
		if st.PrepPause > 0 {
			time.Sleep(st.PrepPause)
		}
		more, err := m.execute(ps, st.Params)
		recs = append(recs, more...)
		if err != nil {
			return recs, err
		}
		return recs, m.closeStmt(ps)
	case StepPrepare:
		if old := cs.handles[st.Handle]; old != nil {
			delete(cs.handles, st.Handle)
			if err := m.closeStmt(old); err != nil {
				return nil, err
			}
		}
		ps, recs, err := m.prepare(st.SQL)
		if ps != nil {
			cs.handles[st.Handle] = ps
		}
		return recs, err
	case StepExecute:
		ps := cs.handles[st.Handle]
		if ps == nil {
			return []record{{key: "no statement #" + strconv.Itoa(st.Handle), text: "no statement #" + strconv.Itoa(st.Handle) + ": its prepare failed or is not in the script"}}, nil
		}
		return m.execute(ps, st.Params)
	case StepClose:
		ps := cs.handles[st.Handle]
		if ps == nil {
			return []record{{key: "no statement to close", text: "no statement to close"}}, nil
		}
		delete(cs.handles, st.Handle)
		return []record{{key: "closed", text: "closed"}}, m.closeStmt(ps)
	case StepObserve:
		return cs.observe(ctx, st)
	case StepKill:
		return cs.kill(ctx, st)
	}
	return nil, fmt.Errorf("unknown step kind %v", st.Kind)
}

// sideRecords runs q on the side connection and labels what it saw. A
// broken side connection is dropped and reported; it is redialed at the
// next StepObserve.
func (cs *clientState) sideRecords(q string) []record {
	recs, err := cs.side.query(q)
	if err != nil {
		recs = append(recs, failRecord(err))
		cs.side.quit()
		cs.side = nil
	}
	for i := range recs {
		recs[i].key = "side: " + q + ": " + recs[i].key
		recs[i].text = "side: " + q + ": " + recs[i].text
	}
	return recs
}

// observe runs st.SQL on the main connection while the side connection,
// straight to MariaDB in both phases, holds an uncommitted row in side.
func (cs *clientState) observe(ctx context.Context, st Step) ([]record, error) {
	if cs.side == nil {
		var err error
		cs.side, err = cs.dial(ctx, cs.e.Addr(), backendUser, backendPassword, 0, 0)
		if err != nil {
			return []record{{key: "side: login failed", text: "side: login failed: " + err.Error()}}, nil
		}
	}
	var out []record
	out = append(out, cs.sideRecords("BEGIN")...)
	if cs.side != nil {
		out = append(out, cs.sideRecords("INSERT INTO side VALUES (1)")...)
	}
	recs, err := cs.main.query(st.SQL)
	out = append(out, recs...)
	if cs.side != nil {
		out = append(out, cs.sideRecords("ROLLBACK")...)
	}
	// The side's own answers are the same in both phases unless something
	// went wrong: keep only those that are not plain OKs.
	kept := out[:0]
	for _, r := range out {
		if isPlainSideOK(r.key) {
			continue
		}
		kept = append(kept, r)
	}
	return kept, err
}

func isPlainSideOK(key string) bool {
	for _, q := range []string{"BEGIN", "INSERT INTO side VALUES (1)", "ROLLBACK"} {
		if strings.HasPrefix(key, "side: "+q+": OK ") {
			return true
		}
	}
	return false
}

// kill sends st.SQL on the main connection, waits until MariaDB runs it,
// sends KILL QUERY with the main connection's handshake id on a second
// connection over the same path, and reads both answers.
func (cs *clientState) kill(ctx context.Context, st Step) ([]record, error) {
	if cs.killer == nil {
		var err error
		cs.killer, err = cs.dial(ctx, cs.t.addr, cs.t.user, cs.t.password, 0, 0)
		if err != nil {
			return []record{{key: "killer: login failed", text: "killer: login failed: " + err.Error()}}, nil
		}
	}
	if err := cs.main.send(append([]byte{wire.ComQuery}, st.SQL...)); err != nil {
		return nil, err
	}
	var out []record
	if !cs.e.waitRunning(ctx, st.SQL, killWait) {
		out = append(out, record{key: "kill: the statement was not seen running", text: fmt.Sprintf("kill: the statement was not seen running within %v", killWait)})
	}
	krecs, kerr := cs.killer.query("KILL QUERY " + strconv.FormatUint(uint64(cs.main.id), 10))
	if kerr != nil {
		krecs = append(krecs, failRecord(kerr))
		cs.killer.quit()
		cs.killer = nil
	}
	for _, r := range krecs {
		r.key, r.text = "killer: "+r.key, "killer: "+r.text
		out = append(out, r)
	}
	recs, err := cs.main.readResults(false)
	return append(out, recs...), err
}
