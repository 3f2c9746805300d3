package gateway

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/directgate/directgate/pools"
	"github.com/directgate/directgate/wire"
)

func TestVarsDiff(t *testing.T) {
	cases := []struct {
		have, want map[string]string
		out        []string // items expected in the SET, in any order after NAMES
	}{
		{nil, nil, nil},
		{map[string]string{"sql_mode": "''"}, map[string]string{"sql_mode": "''"}, nil},
		{nil, map[string]string{"time_zone": "'+00:00'"}, []string{"@@SESSION.time_zone = '+00:00'"}},
		{map[string]string{"time_zone": "'+00:00'"}, nil, []string{"@@SESSION.time_zone = DEFAULT"}},
		{nil, map[string]string{"names": "latin1 COLLATE latin1_swedish_ci", "sql_mode": "'ANSI'"},
			[]string{"NAMES latin1 COLLATE latin1_swedish_ci", "@@SESSION.sql_mode = 'ANSI'"}},
		{map[string]string{"names": "latin1 COLLATE latin1_swedish_ci"}, nil,
			[]string{"NAMES utf8mb4 COLLATE utf8mb4_general_ci"}},
	}
	for _, c := range cases {
		got := varsDiff(c.have, c.want)
		if len(c.out) == 0 {
			if got != "" {
				t.Errorf("varsDiff(%v, %v) = %q, want nothing", c.have, c.want, got)
			}
			continue
		}
		if !strings.HasPrefix(got, "SET ") {
			t.Fatalf("varsDiff = %q", got)
		}
		items := strings.Split(strings.TrimPrefix(got, "SET "), ", ")
		if len(items) != len(c.out) || items[0] != c.out[0] {
			t.Errorf("varsDiff(%v, %v) = %q, want items %q", c.have, c.want, got, c.out)
		}
	}
}

func TestSQLLiteral(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "28800": "28800", "-1": "-1", "1.5": "1.5",
		"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION": "'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION'",
		"+05:30": "'+05:30'", "it's": "'it''s'", "": "''",
	} {
		got, err := sqlLiteral(in)
		if err != nil || got != want {
			t.Errorf("sqlLiteral(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := sqlLiteral(`a\b`); err == nil {
		t.Error("a backslash must not be replayed")
	}
}

func TestToClientError(t *testing.T) {
	backend := &wire.SQLError{Code: 1146, State: "42S02", Message: "Table 'a.b' doesn't exist"}
	cases := []struct {
		err   error
		code  uint16
		state string
		text  string
	}{
		{backend, 1146, "42S02", "Table 'a.b'"},
		{&pools.AcquireTimeoutError{Pool: "main/x/gw", Size: 4, InUse: 4, Waited: 2 * time.Second}, 1040, "08004", "main/x/gw"},
		{&dialError{addr: "127.0.0.1:1", cluster: "main", err: errors.New("connection refused")}, 1429, "HY000", "127.0.0.1:1"},
		{&wire.BackendError{Err: errors.New("EOF")}, 1158, "08S01", "Lost connection"},
		{pools.ErrClosed, 1053, "08S01", "shutdown"},
		{errors.New("odd"), 1105, "HY000", "odd"},
	}
	for _, c := range cases {
		got := toClientError(c.err)
		if got.Code != c.code || got.State != c.state || !strings.Contains(got.Message, c.text) {
			t.Errorf("toClientError(%v) = %v, want %d (%s) containing %q", c.err, got, c.code, c.state, c.text)
		}
	}
	if toClientError(backend) != backend {
		t.Error("backend errors must pass through unchanged")
	}
}

// brokenConn is a backend socket whose writes fail: a connection that
// died while it sat in the pool.
type brokenConn struct{ nopConn }

func (brokenConn) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }

// okServer returns one end of a pipe whose other end answers every
// command with an OK packet.
func okServer(t *testing.T) net.Conn {
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		c := wire.NewConn(server, 1024, 1024)
		for {
			c.ResetSeq()
			if _, err := c.ReadPacket(); err != nil {
				return
			}
			if err := c.WritePacket(wire.AppendOK(nil, wire.OK{Status: wire.StatusAutocommit})); err != nil {
				return
			}
			if err := c.Flush(); err != nil {
				return
			}
		}
	}()
	return client
}

// TestSyncFailureMovesToAnotherConnection: a pooled connection that
// breaks while it is brought in line with the session (its SET fails to
// send) is replaced; the statement is served by another connection
// instead of failing, since none of the client's statement was sent.
func TestSyncFailureMovesToAnotherConnection(t *testing.T) {
	ss := benchSession(t, 0)
	be := ss.cluster.backend("fake:1")
	dials := 0
	p, err := pools.New(pools.Config[*backendConn]{
		Name: "sync", Size: 4, MinIdle: -1,
		Dial: func(context.Context) (*backendConn, error) {
			dials++
			var nc net.Conn = okServer(t)
			if dials == 1 {
				nc = brokenConn{}
			}
			return &backendConn{BackendConn: &wire.BackendConn{Conn: wire.NewConn(nc, 1024, 1024)}, be: be,
				vars: map[string]string{}, multiStmt: true}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	be.pools.Store(&map[poolKey]*pools.Pool[*backendConn]{{}: p})
	ss.vars["sql_mode"] = "'ANSI'"
	ss.nextState()
	route := ss.srv.classifier.Classify("SELECT 1")
	conn, err := ss.backend(route, "", false)
	if err != nil {
		t.Fatalf("backend: %v; want another connection", err)
	}
	// NetConn is the wire socket; its NetConn, the connection dialed.
	if _, broken := conn.Conn.NetConn().(interface{ NetConn() net.Conn }).NetConn().(brokenConn); broken {
		t.Fatal("the broken connection serves the statement")
	}
	if dials != 2 {
		t.Errorf("%d dials, want 2 (the broken connection, then its replacement)", dials)
	}
	if conn.vars["sql_mode"] != "'ANSI'" {
		t.Errorf("the replacement's sql_mode: %q", conn.vars["sql_mode"])
	}
}

// TestForceCloseEndsPrimaryWait: a session waiting for a primary (up to
// failover_buffer) stops waiting when the gateway cuts it, instead of
// holding a forced shutdown up for the whole buffer.
func TestForceCloseEndsPrimaryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ss := benchSession(t, 1)
		ss.ctx, ss.cancel = context.WithCancel(context.Background())
		ss.nc = nopConn{}
		done := make(chan error, 1)
		go func() {
			// The primary refused the statement: wait for another one.
			_, err := ss.primaryBackend(ss.srv.health.Snapshot(), ss.cluster.conf.Load(), "fake:1", false)
			done <- err
		}()
		synctest.Wait() // the wait for a primary has begun
		ss.ForceClose()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("primaryBackend after forceClose: %v, want context.Canceled", err)
		}
	})
}
