package e2e

import (
	"context"
	"database/sql"
	"testing"
)

// FLUSH TABLE <list> WITH READ LOCK (MariaDB's singular TABLE, which the
// parser does not read) holds table locks on its connection, as LOCK
// TABLES does: the session stays on that connection until UNLOCK TABLES,
// and another session never gets it with the lock (that one's own FLUSH
// ... WITH READ LOCK would fail with 1192 there). Directly and through a
// pool of two, in both reuse orders, every statement succeeds.
func TestFlushTableWithReadLockPins(t *testing.T) {
	mustExec(t, direct(t), "CREATE TABLE IF NOT EXISTS flushlock1 (a INT)", "CREATE TABLE IF NOT EXISTS flushlock2 (a INT)")
	script := func(t *testing.T, db *sql.DB) {
		ctx := context.Background()
		a, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, s := range []struct {
			c *sql.Conn
			q string
		}{
			{a, "FLUSH TABLE flushlock1 WITH READ LOCK"},
			{b, "FLUSH TABLE flushlock2 WITH READ LOCK"},
			{b, "SELECT * FROM flushlock2"},
			{b, "UNLOCK TABLES"},
			{a, "SELECT * FROM flushlock1"},
			{a, "UNLOCK TABLES"},
			{b, "FLUSH TABLES flushlock1, flushlock2 WITH READ LOCK"},
			{a, "SELECT * FROM flushlock2"},
			{b, "UNLOCK TABLES"},
		} {
			if _, err := s.c.ExecContext(ctx, s.q); err != nil {
				t.Errorf("%s: %v", s.q, err)
			}
		}
	}
	t.Run("direct", func(t *testing.T) { script(t, direct(t)) })
	for _, order := range []string{"round_robin", "lifo"} {
		t.Run(order, func(t *testing.T) {
			srv := startTestGateway(t, "flushlock", clusterYAML(0, backendUser, backendPass, "{size: 2, min_idle: 2, order: "+order+"}"))
			script(t, open(t, dsnFor(srv.Addr().String(), appUser, appPass)))
		})
	}
	mustExec(t, direct(t), "DROP TABLE flushlock1, flushlock2")
}
