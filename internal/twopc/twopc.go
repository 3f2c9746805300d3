// Package twopc is what the gateway and the owner share of atomic commit
// across clusters: the XA transaction ids the gateway gives its
// participants, and the statements by which it writes its decisions to
// the coordinator log the owner keeps.
//
// A transaction's gtrid is "dg-<start, Unix nanoseconds, hex>-<random,
// hex>": the resolver reads from it how long the transaction has been
// under way, in whatever process finds it. Each participant's branch
// qualifier is its cluster's name; the format id is FormatID.
package twopc

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// FormatID is the XA format id of the gateway's transactions ("dg").
const FormatID = 0x6467

// prefix starts every gtrid of the gateway's.
const prefix = "dg-"

// NewGTRID returns a fresh transaction id that began at start.
func NewGTRID(start time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + strconv.FormatInt(start.UnixNano(), 16) + "-" + hex.EncodeToString(b[:])
}

// Started returns when the transaction gtrid began; ok is false for an
// id that is not the gateway's.
func Started(gtrid string) (t time.Time, ok bool) {
	rest, found := strings.CutPrefix(gtrid, prefix)
	if !found {
		return time.Time{}, false
	}
	ns, _, found := strings.Cut(rest, "-")
	if !found {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ns, 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// XID is the xid of the branch of transaction gtrid on cluster branch, as
// the XA statements take it.
func XID(gtrid, branch string) string {
	return quote(gtrid) + "," + quote(branch) + "," + strconv.Itoa(FormatID)
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// The log statements' verbs.
const (
	// VerbCommit records the decision to commit.
	VerbCommit = "COMMIT"
	// VerbForget drops a carried-out decision.
	VerbForget = "FORGET"
)

// CommitStatement is the statement that makes the decision to commit
// gtrid, over the clusters parts, durable in the coordinator log. The
// owner answers OK, or error 1613 when the resolver decided to roll the
// transaction back first.
func CommitStatement(gtrid string, parts []string) string {
	return "DIRECTGATE TWOPC " + VerbCommit + " " + quote(gtrid) + " " + quote(strings.Join(parts, ","))
}

// ForgetStatement drops the log's record of gtrid once every participant
// committed.
func ForgetStatement(gtrid string) string {
	return "DIRECTGATE TWOPC " + VerbForget + " " + quote(gtrid)
}

// ParseStatement reads a statement of CommitStatement's or
// ForgetStatement's.
func ParseStatement(q string) (verb, gtrid, parts string, ok bool) {
	rest, found := strings.CutPrefix(q, "DIRECTGATE TWOPC ")
	if !found {
		return "", "", "", false
	}
	verb, rest, _ = strings.Cut(rest, " ")
	gtrid, rest, ok = unquote(rest)
	if !ok {
		return "", "", "", false
	}
	switch verb {
	case VerbForget:
		return verb, gtrid, "", rest == ""
	case VerbCommit:
		parts, rest, ok = unquote(strings.TrimPrefix(rest, " "))
		return verb, gtrid, parts, ok && rest == ""
	}
	return "", "", "", false
}

// unquote reads an SQL string literal at the start of s.
func unquote(s string) (val, rest string, ok bool) {
	if !strings.HasPrefix(s, "'") {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}
