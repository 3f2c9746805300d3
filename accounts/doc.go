// Package accounts checks logins against MariaDB's own accounts
// (mysql.global_priv) as MariaDB does: it keeps the account rows read from
// a server (Cache), picks the row MariaDB would pick for a client's address
// (Match: Host patterns with % and _, IP/netmask, 'localhost' for loopback
// clients, the most specific row first) and verifies the client's
// mysql_native_password answer against the stored hash (VerifyNative),
// which also yields SHA1(password), enough to log in to MariaDB as the
// account later. It knows nothing of sessions or pools: the gateway reads
// the rows through a Loader and tracks the accounts' pools with a Tracker.
package accounts
