// Package querystats keeps per-statement digests: a Normalizer turns a
// statement into its digest text and Fingerprint (literals replaced by ?,
// comments and spacing folded, IN and VALUES lists folded, words
// lower-cased), and a Store counts executions per fingerprint, user,
// database and cluster (count, errors by number, warnings, time with a
// small histogram for p50 and p99, pool wait, rows, bytes, first and last
// seen, backend role, last example) in bounded memory, evicting the least
// recently seen entries and counting them.
//
// The package is pure: no I/O, no globals. The gateway normalizes each
// statement once (a prepared statement once, at prepare) and records it
// when its answer ends; operator views read copies with Store.Top.
package querystats
