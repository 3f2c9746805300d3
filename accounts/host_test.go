package accounts

import (
	"net/netip"
	"testing"
)

func TestHostSort(t *testing.T) {
	for _, c := range []struct {
		host string
		want int
	}{
		{"", 0}, {"%", 1}, {"_", 1}, {"abc%", 4}, {"192.168.1.%", 11},
		{"localhost", 128}, {"127.0.0.1", 128}, {`a\%b`, 128},
		{"192.168.1.0/255.255.255.0", 128},
	} {
		if got := hostSort(c.host); got != c.want {
			t.Errorf("hostSort(%q) = %d, want %d", c.host, got, c.want)
		}
	}
}

func TestHostMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, ip string
		want        bool
	}{
		{"%", "10.1.2.3", true},
		{"", "10.1.2.3", true},
		{"localhost", "127.0.0.1", true},
		{"LOCALHOST", "127.0.0.1", true},
		{"localhost", "::1", true},
		{"localhost", "10.1.2.3", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.%", "127.0.0.1", true},
		{"192.168.1.%", "192.168.1.5", true},
		{"192.168.1.%", "192.168.10.5", false},
		{"192.168.1._", "192.168.1.5", true},
		{"192.168.1._", "192.168.1.55", false},
		{"192.168.1.0/255.255.255.0", "192.168.1.77", true},
		{"192.168.1.0/255.255.255.0", "192.168.2.1", false},
		{"192.168.1.1/255.255.255.0", "192.168.1.1", false}, // bits outside the mask: no netmask, no match
		{"10.0.0.%", "::1", false},
		{"::1", "::1", true},
		{"h1.example.net", "10.1.2.3", false}, // names other than localhost are not resolved
	} {
		ip := netip.MustParseAddr(c.ip)
		host := ClientHost(ip)
		if host == ip.String() {
			host = ""
		}
		if got := hostMatches(c.pattern, host, ip); got != c.want {
			t.Errorf("hostMatches(%q, %s) = %v, want %v", c.pattern, c.ip, got, c.want)
		}
	}
}

// TestMatch follows MariaDB's documented examples of which account row a
// login uses ("Account names", MySQL's "Access Control, Stage 1").
func TestMatch(t *testing.T) {
	rows := func(pairs ...string) []Row {
		var r []Row
		for i := 0; i < len(pairs); i += 2 {
			r = append(r, Row{User: pairs[i], Host: pairs[i+1]})
		}
		sortRows(r)
		return r
	}
	for _, c := range []struct {
		name       string
		rows       []Row
		user, ip   string
		want       string
		wantNoness bool
	}{
		// The manual's first example: jeffrey from localhost gets the
		// anonymous ''@'localhost', more specific than 'jeffrey'@'%'.
		{"anonymous more specific", rows("root", "%", "jeffrey", "%", "root", "localhost", "", "localhost"), "jeffrey", "127.0.0.1", "''@'localhost'", false},
		{"root from localhost", rows("root", "%", "jeffrey", "%", "root", "localhost", "", "localhost"), "root", "127.0.0.1", "'root'@'localhost'", false},
		{"root from elsewhere", rows("root", "%", "jeffrey", "%", "root", "localhost", "", "localhost"), "root", "10.0.0.1", "'root'@'%'", false},
		// The second: an exact host wins over %, even anonymous.
		{"anonymous exact host", rows("jeffrey", "%", "", "192.168.1.10"), "jeffrey", "192.168.1.10", "''@'192.168.1.10'", false},
		{"named row, same specificity", rows("jeffrey", "localhost", "", "localhost"), "jeffrey", "127.0.0.1", "'jeffrey'@'localhost'", false},
		{"localhost before 127.0.0.1", rows("u", "127.0.0.1", "u", "localhost"), "u", "127.0.0.1", "'u'@'localhost'", false},
		{"longer prefix first", rows("u", "192.168.%", "u", "192.168.1.%", "u", "%"), "u", "192.168.1.4", "'u'@'192.168.1.%'", false},
		{"netmask before wildcard", rows("u", "10.%", "u", "10.0.0.0/255.0.0.0"), "u", "10.9.9.9", "'u'@'10.0.0.0/255.0.0.0'", false},
		{"other host only", rows("foo", "10.1.1.1"), "foo", "127.0.0.1", "", true},
		{"unknown user", rows("foo", "%"), "bar", "127.0.0.1", "", true},
		{"anonymous only", rows("", "%"), "bar", "127.0.0.1", "''@'%'", false},
	} {
		r, ok := match(c.rows, c.user, netip.MustParseAddr(c.ip))
		if ok == c.wantNoness || ok && r.Name() != c.want {
			t.Errorf("%s: match(%s from %s) = %s, %v; want %s", c.name, c.user, c.ip, r.Name(), ok, c.want)
		}
	}
}

func TestWildMatch(t *testing.T) {
	for _, c := range []struct {
		s, p string
		want bool
	}{
		{"abc", "abc", true}, {"abc", "a%", true}, {"abc", "%c", true}, {"abc", "%b%", true},
		{"abc", "a_c", true}, {"abc", "a_", false}, {"a%c", `a\%c`, true}, {"abc", `a\%c`, false},
		{"", "%", true}, {"", "_", false}, {"abc", "%%%", true},
	} {
		if got := wildMatch(c.s, c.p); got != c.want {
			t.Errorf("wildMatch(%q, %q) = %v", c.s, c.p, got)
		}
	}
}
