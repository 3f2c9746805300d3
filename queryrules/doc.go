// Package queryrules holds the operator's query rules: parsed and checked
// from the configuration (Compile names the rule and what is wrong), then
// tried in order against each statement (Set.Match), first match wins
// unless the rule says continue. A rule matches on any of a statement's
// fingerprint, a regular expression on its digest text, its kind, its
// tables, its user, its database and its client's address, and decides
// deny, route, timeout, max_rows, priority and log; a dry_run rule is
// counted and logged but changes nothing.
//
// The package is pure: no I/O, no globals. The session asks Match once
// per statement, when the statement is admitted, and acts on the
// Decision.
package queryrules
