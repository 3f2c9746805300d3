package accounts

import (
	"net/netip"
	"sort"
	"strings"
)

// Row is one account of mysql.global_priv.
type Row struct {
	// User and Host name the account; User "" is the anonymous account.
	User, Host string
	// Plugin is the authentication plugin ("" is read as
	// mysql_native_password, as MariaDB does) and AuthString its
	// authentication_string (for mysql_native_password "*" and 40 hex
	// digits, or "" for no password).
	Plugin, AuthString string
	// Locked is ACCOUNT LOCK.
	Locked bool
	// Version identifies what the account was when it was read: plugin,
	// authentication string, global privileges and lock. It changes
	// whenever any of them changes.
	Version uint64
}

// Name is the account as MariaDB writes it: 'user'@'host'.
func (r Row) Name() string { return "'" + r.User + "'@'" + r.Host + "'" }

// ClientHost is the host name MariaDB gives a client connecting from ip
// over TCP, as its messages print it ('x'@'host'): "localhost" for a
// loopback address (MariaDB does not resolve those), else the address.
// The gateway resolves no other names: it matches other clients by
// address only, as MariaDB does with skip-name-resolve.
func ClientHost(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return "localhost"
	}
	return ip.String()
}

// hostSort is MariaDB's get_sort() of a Host pattern: 128 for a pattern
// without wildcards, the position (from 1, at most 127) of its first
// wildcard otherwise, 0 for the empty pattern (any host). Rows sort by it,
// larger (more specific) first.
func hostSort(h string) int {
	chars := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '\\' && i+1 < len(h):
			i++
		case c == '%' || c == '_':
			return min(i+1, 127)
		}
		chars = 128
	}
	return chars
}

// sortRows orders rows as MariaDB orders its acl_users: by user name, then
// the most specific Host first (hostSort), ties broken with the larger
// host name first (so 'localhost' comes before '127.0.0.1').
func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.User != b.User {
			return a.User < b.User
		}
		if sa, sb := hostSort(a.Host), hostSort(b.Host); sa != sb {
			return sa > sb
		}
		return a.Host > b.Host
	})
}

// hostMatches reports whether pattern admits a client with host name host
// (may be "") and address ip, as MariaDB's compare_hostname: an
// "address/netmask" pattern by mask, any other by wildcards, case-blind
// against the host name and exactly against the address. The empty
// pattern admits every client.
func hostMatches(pattern, host string, ip netip.Addr) bool {
	if pattern == "" {
		return true
	}
	if addr, mask, ok := netmask(pattern); ok {
		if !ip.Is4() {
			return false
		}
		a := ip.As4()
		for i := range a {
			if a[i]&mask[i] != addr[i] {
				return false
			}
		}
		return true
	}
	if host != "" && wildMatch(strings.ToLower(host), strings.ToLower(pattern)) {
		return true
	}
	return wildMatch(ip.String(), pattern)
}

// netmask parses MariaDB's "a.b.c.d/m.m.m.m" Host form; ok is false for
// any other pattern (then it is compared with wildcards), and for an
// address with bits outside its mask (MariaDB never matches those).
func netmask(p string) (addr, mask [4]byte, ok bool) {
	a, m, found := strings.Cut(p, "/")
	if !found {
		return addr, mask, false
	}
	ai, err1 := netip.ParseAddr(a)
	mi, err2 := netip.ParseAddr(m)
	if err1 != nil || err2 != nil || !ai.Is4() || !mi.Is4() {
		return addr, mask, false
	}
	addr, mask = ai.As4(), mi.As4()
	for i := range addr {
		if addr[i]&mask[i] != addr[i] {
			return addr, mask, false
		}
	}
	return addr, mask, true
}

// wildMatch matches s against a LIKE-style pattern: % any run, _ any one
// byte, \ quotes the next byte.
func wildMatch(s, p string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for len(p) > 0 && p[0] == '%' {
				p = p[1:]
			}
			if p == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildMatch(s[i:], p) {
					return true
				}
			}
			return false
		case '_':
			if s == "" {
				return false
			}
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if s == "" || s[0] != p[0] {
				return false
			}
		}
		s, p = s[1:], p[1:]
	}
	return s == ""
}

// match picks the row MariaDB picks for user from a client at ip among
// rows sorted by sortRows (find_user_or_anon): the first row of that name
// whose Host admits the client; an anonymous row (”) only when it is
// more specific than that one, or when none of the name admits it.
func match(rows []Row, user string, ip netip.Addr) (Row, bool) {
	ip = ip.Unmap()
	host := ClientHost(ip)
	if host == ip.String() {
		host = ""
	}
	var found *Row
	start := sort.Search(len(rows), func(i int) bool { return rows[i].User >= user })
	for i := start; i < len(rows) && rows[i].User == user; i++ {
		if hostMatches(rows[i].Host, host, ip) {
			found = &rows[i]
			break
		}
	}
	if user != "" {
		for i := 0; i < len(rows) && rows[i].User == ""; i++ {
			if found != nil && hostSort(rows[i].Host) <= hostSort(found.Host) {
				break
			}
			if hostMatches(rows[i].Host, host, ip) {
				found = &rows[i]
				break
			}
		}
	}
	if found == nil {
		return Row{}, false
	}
	return *found, true
}
