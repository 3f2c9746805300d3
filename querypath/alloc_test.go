package querypath

import "testing"

// hotStatements are statements of sysbench's OLTP workloads (text protocol,
// and the text of its prepared statements) plus other statements the gateway
// sees all the time. Classifying them must not allocate.
var hotStatements = []string{
	"SELECT c FROM sbtest1 WHERE id=5042",
	"SELECT c FROM sbtest1 WHERE id=?",
	"SELECT c FROM sbtest7 WHERE id BETWEEN 5042 AND 5141",
	"SELECT SUM(k) FROM sbtest2 WHERE id BETWEEN 1 AND 100",
	"SELECT c FROM sbtest4 WHERE id BETWEEN 1 AND 100 ORDER BY c",
	"SELECT DISTINCT c FROM sbtest5 WHERE id BETWEEN ? AND ? ORDER BY c",
	"UPDATE sbtest3 SET k=k+1 WHERE id=5000",
	"UPDATE sbtest6 SET c='83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330' WHERE id=4992",
	"DELETE FROM sbtest8 WHERE id=5017",
	"INSERT INTO sbtest8 (id, k, c, pad) VALUES (5017, 4993, '68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574-28203206787-41238978918-19503783441', '22195207048-70116052123-74140395089-76317954521-98694025897')",
	"BEGIN",
	"COMMIT",
	"ROLLBACK",
	"SELECT 1",
	"SELECT @@max_allowed_packet",
	"SELECT @x",
	"SELECT * FROM t WHERE id = 1 FOR UPDATE",
	"SELECT LAST_INSERT_ID()",
	"SHOW WARNINGS",
	"USE sbtest",
	"SET @x = 1",
	"KILL QUERY 5",
	"SELECT NEXT 10 VALUES FROM seq",
	"/* comment */ SELECT `a` FROM `t` WHERE `b` = 'x' -- trailing",
}

var sink Route

func TestClassifyDoesNotAllocate(t *testing.T) {
	c := classifier(t)
	for _, sql := range hotStatements {
		n := testing.AllocsPerRun(200, func() { sink = c.Classify(sql) })
		if n != 0 {
			t.Errorf("Classify(%q): %v allocations, want 0", sql, n)
		}
	}
}
