package querypath

import "testing"

// parserStatements are statements the fast path leaves to the Vitess parser.
var parserStatements = []string{
	"CREATE TEMPORARY TABLE t1 (id INT PRIMARY KEY, v VARCHAR(10))",
	"SELECT a, b INTO @x, @y FROM t WHERE id = 1",
	"WITH x AS (SELECT id FROM t WHERE a > 5) SELECT * FROM x",
	"DROP TEMPORARY TABLE IF EXISTS t1",
	"LOCK TABLES t1 WRITE, t2 READ",
	"ALTER TABLE sbtest1 ADD COLUMN x INT",
}

func BenchmarkClassifyFast(b *testing.B) {
	c := classifier(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink = c.Classify(hotStatements[i%10]) // the sysbench statements
	}
}

func BenchmarkClassifySet(b *testing.B) {
	c := classifier(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = c.Classify("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")
	}
}

func BenchmarkClassifyParser(b *testing.B) {
	c := classifier(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		sink = c.Classify(parserStatements[i%len(parserStatements)])
	}
}
