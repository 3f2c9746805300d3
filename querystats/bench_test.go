package querystats

import (
	"testing"
	"time"

	"vitess.io/vitess/go/vt/sqlparser"
)

// sysbenchStatements are oltp_read_write's statements, as the gateway
// sees them most.
var sysbenchStatements = []string{
	"SELECT c FROM sbtest1 WHERE id=5012",
	"SELECT c FROM sbtest3 WHERE id BETWEEN 4012 AND 4111",
	"SELECT SUM(k) FROM sbtest2 WHERE id BETWEEN 212 AND 311",
	"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 99 AND 198 ORDER BY c",
	"UPDATE sbtest1 SET k=k+1 WHERE id=4999",
	"UPDATE sbtest4 SET c='83868641912-28773972837-60736120486-75162659906-27563526494' WHERE id=5010",
	"DELETE FROM sbtest1 WHERE id=5000",
	"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5000, 4993, '21489378011-8385', '63188288836-9235')",
}

var sinkFP Fingerprint

// BenchmarkNormalize is the gateway's normalizer on the sysbench
// statements.
func BenchmarkNormalize(b *testing.B) {
	var n Normalizer
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, sinkFP = n.Normalize(sysbenchStatements[i%len(sysbenchStatements)])
	}
}

// BenchmarkVitessNormalize is the alternative: Vitess's parser and its
// literal redaction, on the same statements.
func BenchmarkVitessNormalize(b *testing.B) {
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "10.11.0-MariaDB"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s, err := p.RedactSQLQuery(sysbenchStatements[i%len(sysbenchStatements)])
		if err != nil {
			b.Fatal(err)
		}
		sinkFP = Fingerprint(hash([]byte(s)))
	}
}

// BenchmarkRecord is one statement's record into a store holding it.
func BenchmarkRecord(b *testing.B) {
	s := New(Config{MaxDigests: 5000, ExampleLength: 256})
	var n Normalizer
	type pre struct {
		k    Key
		text []byte
	}
	var keys []pre
	for _, q := range sysbenchStatements {
		text, fp := n.Normalize(q)
		keys = append(keys, pre{Key{Fingerprint: fp, User: "sbtest", Database: "sbtest", Cluster: "main"}, append([]byte(nil), text...)})
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := keys[i%len(keys)]
		s.Record(p.k, p.text, sysbenchStatements[i%len(sysbenchStatements)], Sample{Duration: 300 * time.Microsecond, RowsSent: 1, Role: "primary"}, now)
	}
}

// BenchmarkNormalizeRecord is the whole digest path of one text
// statement: normalize, then record.
func BenchmarkNormalizeRecord(b *testing.B) {
	s := New(Config{MaxDigests: 5000, ExampleLength: 256})
	var n Normalizer
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q := sysbenchStatements[i%len(sysbenchStatements)]
		text, fp := n.Normalize(q)
		s.Record(Key{Fingerprint: fp, User: "sbtest", Database: "sbtest", Cluster: "main"}, text, q, Sample{Duration: 300 * time.Microsecond, Role: "primary"}, now)
	}
}

// BenchmarkRecordParallel is Record from every CPU at once.
func BenchmarkRecordParallel(b *testing.B) {
	s := New(Config{MaxDigests: 5000, ExampleLength: 256})
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var n Normalizer
		i := 0
		for pb.Next() {
			q := sysbenchStatements[i%len(sysbenchStatements)]
			text, fp := n.Normalize(q)
			s.Record(Key{Fingerprint: fp, User: "sbtest", Database: "sbtest", Cluster: "main"}, text, q, Sample{Duration: 300 * time.Microsecond}, now)
			i++
		}
	})
}
