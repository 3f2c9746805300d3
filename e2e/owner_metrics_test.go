package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/directgate/directgate/internal/metricstest"
	"github.com/directgate/directgate/wire"
)

// ownerGet asks the owner's HTTP endpoint for path.
func (o *ownerStack) ownerGet(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + o.httpAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// ownerMetrics scrapes the owner's /metrics.
func (o *ownerStack) ownerMetrics(t *testing.T) ownerSamples {
	t.Helper()
	code, body := o.ownerGet(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return ownerSamples(metricstest.Parse(t, body))
}

// ownerSamples is one scrape of the owner's /metrics.
type ownerSamples map[string]*dto.MetricFamily

// get is the sample of directgate_owner_<name> with labels (name, value,
// ...); 0 when there is none.
func (s ownerSamples) get(name string, labels ...string) float64 {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, _ := metricstest.Value(s, "directgate_owner_"+name, want)
	return v
}

// TestOwnerMetrics draws sequence values and runs a message queue through
// a gateway, then checks that the owner's counters moved by exactly what
// was done, and that /readyz and /healthz say it serves.
func TestOwnerMetrics(t *testing.T) {
	st := startOwnerStack(t, 1)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := st.ownerGet(t, "/readyz")
		if code == http.StatusOK && body == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of the only owner: %d %s", code, body)
		}
	}
	if code, body := st.ownerGet(t, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	before := st.ownerMetrics(t)
	seq, small, msgs := ownerDB+".seq", ownerDB+".small_seq", ownerDB+".msgs"

	// Sequences: seq (cache 1000) hands out 5 + 10 values from one block;
	// small_seq (cache 3) 7 values from 3 blocks.
	db := st.session(t, 0)
	for range 5 {
		var v int64
		if err := db.QueryRow("SELECT NEXT VALUE FROM seq").Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	var v int64
	if err := db.QueryRow("SELECT NEXT 10 VALUES FROM seq").Scan(&v); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		if err := db.QueryRow("SELECT NEXT VALUE FROM small_seq").Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.Exec("SELECT NEXT 0 VALUES FROM seq")
	sqlErr(t, err, 1210, "HY000")

	// Messages: one stream, 12 messages in 3 inserts, acked in 2.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	bc, err := wire.Dial(ctx, st.gateways[0], wire.DialOptions{User: appUser, Password: appPass})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	ids := make(chan string, 100)
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- bc.QueryRows("STREAM * FROM "+msgs, func(row [][]byte) { ids <- string(row[0]) })
	}()
	waitOwner(t, st, "a subscriber", func(s ownerSamples) bool { return s.get("stream_subscribers", "table", msgs) == 1 })
	const perInsert, inserts = 4, 3
	for i := range inserts {
		var rows []string
		for j := range perInsert {
			id := 1000 + i*perInsert + j
			rows = append(rows, fmt.Sprintf("(%d, %d, 'm%d')", id, time.Now().UnixNano(), id))
		}
		mustExec(t, db, "INSERT INTO msgs (id, sent_ns, body) VALUES "+strings.Join(rows, ", "))
	}
	var got []string
	for len(got) < perInsert*inserts {
		select {
		case id := <-ids:
			got = append(got, id)
		case err := <-streamDone:
			t.Fatalf("the stream ended after %d messages: %v", len(got), err)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d messages", len(got), perInsert*inserts)
		}
	}
	half := len(got) / 2
	for _, batch := range [][]string{got[:half], got[half:]} {
		mustExec(t, db, "UPDATE msgs SET time_acked = "+strconv.FormatInt(time.Now().UnixNano(), 10)+
			", time_next = NULL WHERE id IN ("+strings.Join(batch, ",")+")")
	}
	// A delivery is counted right after its rows were written: wait for
	// the last one, then check every count.
	n := float64(len(got))
	after := waitOwner(t, st, "the deliveries", func(s ownerSamples) bool {
		return s.get("messages_delivered_total", "table", msgs)-before.get("messages_delivered_total", "table", msgs) >= n
	})
	delta := func(name string, labels ...string) float64 {
		return after.get(name, labels...) - before.get(name, labels...)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sequence_values_total", []string{"table", seq}, 15},
		{"sequence_blocks_total", []string{"table", seq}, 1},
		{"sequence_values_total", []string{"table", small}, 7},
		{"sequence_blocks_total", []string{"table", small}, 3},
		{"statements_total", []string{"kind", "sequence", "outcome", "ok"}, 13},
		{"statements_total", []string{"kind", "sequence", "outcome", "error"}, 1},
		{"statements_total", []string{"kind", "message", "outcome", "ok"}, inserts + 2},
		{"statements_total", []string{"kind", "message", "outcome", "error"}, 0},
		{"messages_inserted_total", []string{"table", msgs}, n},
		{"messages_delivered_total", []string{"table", msgs}, n},
		{"messages_acked_total", []string{"table", msgs}, n},
	} {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("directgate_owner_%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"leading", nil, 1},
		{"term", nil, 1},
		{"primary_up", nil, 1},
		{"tables", []string{"kind", "sequence"}, 2},
		{"tables", []string{"kind", "message"}, 1},
		{"stream_subscribers", []string{"table", msgs}, 1},
		{"queue_pending", []string{"table", msgs}, 0},
		{"queue_in_flight", []string{"table", msgs}, 0},
	} {
		if got := after.get(c.name, c.labels...); got != c.want {
			t.Errorf("directgate_owner_%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if s := after.get("sessions"); s < 2 {
		t.Errorf("directgate_owner_sessions = %v, want at least 2 (the gateway's pooled connection and the stream's)", s)
	}

	// The client leaves: the gateway ends its stream on the owner, which
	// counts it then, as ok.
	bc.Close()
	<-streamDone
	waitOwner(t, st, "the stream's end", func(s ownerSamples) bool {
		return s.get("stream_subscribers", "table", msgs) == 0 &&
			s.get("statements_total", "kind", "stream", "outcome", "ok")-before.get("statements_total", "kind", "stream", "outcome", "ok") == 1
	})
}

// waitOwner scrapes the owner's /metrics until ok says yes (10 s at
// most) and returns that scrape.
func waitOwner(t *testing.T, st *ownerStack, what string, ok func(ownerSamples) bool) ownerSamples {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := st.ownerMetrics(t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			_, body := st.ownerGet(t, "/metrics")
			t.Fatalf("waiting for %s in the owner's metrics:\n%s", what, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
