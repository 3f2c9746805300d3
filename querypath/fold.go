package querypath

// ASCII word tests on statement text that do not allocate, for the
// cheap checks before (or instead of) classification.

// FirstWord returns the first word of sql (ASCII letters) and what
// follows it.
func FirstWord(sql []byte) (word, rest []byte) {
	i := 0
	for i < len(sql) && (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
		i++
	}
	j := i
	for j < len(sql) && sql[j]|0x20 >= 'a' && sql[j]|0x20 <= 'z' {
		j++
	}
	return sql[i:j], sql[j:]
}

// EqFold reports whether b is the upper-case ASCII word k in any case.
func EqFold(b []byte, k string) bool {
	if len(b) != len(k) {
		return false
	}
	for i := range b {
		if b[i]&^0x20 != k[i] {
			return false
		}
	}
	return true
}

// ContainsFold reports whether s contains the upper-case ASCII word k in
// any case. It does not allocate.
func ContainsFold(s []byte, k string) bool {
	for i := 0; i+len(k) <= len(s); i++ {
		if s[i]&^0x20 == k[0] && EqFold(s[i:i+len(k)], k) {
			return true
		}
	}
	return false
}
