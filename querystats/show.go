package querystats

import (
	"fmt"
	"strconv"
	"strings"
)

// ShowQueries is what SHOW GATEWAY QUERIES asks for.
type ShowQueries struct {
	// Reset says SHOW GATEWAY QUERIES RESET: forget every digest.
	Reset bool
	Order Order
	// Limit is the most rows to show; 0 shows all.
	Limit int
}

// ParseShowQueries reads "SHOW GATEWAY QUERIES [ORDER BY total_time |
// count | errors | p99] [LIMIT n]" and "SHOW GATEWAY QUERIES RESET"
// (keywords in any case, an optional ; at the end). The error says what
// is wrong, for a syntax error to the client.
func ParseShowQueries(sql string) (ShowQueries, error) {
	var q ShowQueries
	w := strings.Fields(strings.TrimSuffix(strings.TrimSpace(sql), ";"))
	if len(w) < 3 || !strings.EqualFold(w[0], "show") || !strings.EqualFold(w[1], "gateway") || !strings.EqualFold(w[2], "queries") {
		return q, fmt.Errorf("expected SHOW GATEWAY QUERIES")
	}
	w = w[3:]
	if len(w) == 1 && strings.EqualFold(w[0], "reset") {
		q.Reset = true
		return q, nil
	}
	if len(w) >= 3 && strings.EqualFold(w[0], "order") && strings.EqualFold(w[1], "by") {
		o, ok := ParseOrder(strings.ToLower(w[2]))
		if !ok {
			return q, fmt.Errorf("ORDER BY takes total_time, count, errors or p99, not %q", w[2])
		}
		q.Order, w = o, w[3:]
	}
	if len(w) == 2 && strings.EqualFold(w[0], "limit") {
		n, err := strconv.Atoi(w[1])
		if err != nil || n < 0 {
			return q, fmt.Errorf("LIMIT takes a number of rows, not %q", w[1])
		}
		q.Limit, w = n, nil
	}
	if len(w) > 0 {
		return q, fmt.Errorf("unexpected %q: SHOW GATEWAY QUERIES [ORDER BY total_time|count|errors|p99] [LIMIT n], or SHOW GATEWAY QUERIES RESET", strings.Join(w, " "))
	}
	return q, nil
}
