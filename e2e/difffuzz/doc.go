// Package difffuzz is a differential fuzzer for the gateway's connection
// multiplexing. It proves (as far as random testing proves anything) that
// the gateway never hands one client another client's session state,
// never runs a statement with the wrong settings and never loses a
// setting, by running the same random stateful client scripts twice and
// comparing everything the clients see:
//
//  1. directly against MariaDB, every client on its own connection;
//  2. through a fresh in-process gateway whose pool has only one or two
//     backend connections (pool: {size: 1 or 2, min_idle: 0}), reused
//     round robin in even rounds and last in, first out in odd ones
//     (pool.order), and query
//     consolidation on, all clients (8 by default) at once, so that they
//     take turns on the pooled connections.
//
// Any difference is a divergence. The test reports, per diverging client,
// the first diverging step with what the client saw directly and through
// the gateway, groups divergences by a signature (the grammar rule of the
// step), and shrinks the first divergence of each signature to a small
// reproducing round by delta debugging: it tries a pool of one connection,
// drops the steps after the diverging one, then whole clients, then chunks
// of steps, rerunning each candidate (same scripts, fresh databases, fresh
// gateway) while the same step of the same client still diverges. Shrinking
// is bounded in runs and time.
//
// # Running
//
//	go test ./e2e/difffuzz                      # 60 scripts, well under a minute when nothing diverges
//	DIFFFUZZ_SCRIPTS=10000 go test ./e2e/difffuzz -run TestDifferential -timeout 0 -v
//
// mariadbd must be installed (see package mariadbtest). Environment:
//
//	DIFFFUZZ_SCRIPTS     client scripts to run in all (default 60; 8 per round)
//	DIFFFUZZ_SEED        generator seed (default: the clock; always printed)
//	DIFFFUZZ_ROUND       run only this round of the seed (replay a failure)
//	DIFFFUZZ_CLIENTS     clients per round (default 8)
//	DIFFFUZZ_POOL        gateway pool size (default: 1 or 2, per round)
//	DIFFFUZZ_POOL_ORDER  gateway pool.order (default: round_robin in even
//	                     rounds, lifo in odd ones)
//	DIFFFUZZ_PIPELINING  gateway pipelining.connections in rounds whose pool
//	                     is larger (default 0: off; set DIFFFUZZ_POOL=3 and
//	                     DIFFFUZZ_IO_LOOPS=0 to run it in every round). SHOW
//	                     WARNINGS after a read with warnings that another read
//	                     was queued behind diverges by design (see
//	                     docs/sessions.md, "Pipelined reads")
//	DIFFFUZZ_IO_LOOPS    gateway io_loops (default: 0 or 1, per round: sessions
//	                     on goroutines or on an io_uring loop)
//	DIFFFUZZ_TIME        start no round after this long (default: no limit)
//	DIFFFUZZ_SHRINK      divergences to shrink, most frequent first (default 6; 0: none)
//	DIFFFUZZ_SHRINK_TIME time limit of each shrink (default 15s)
//	DIFFFUZZ_KILL=1      add the KILL QUERY rule (off by default, see below)
//	DIFFFUZZ_SELFCHECK=1 run the direct phase twice instead: checks that the
//	                     fuzzer itself is deterministic (must never diverge)
//	DIFFFUZZ_DUMP=1      log every step of every round with both results
//	DIFFFUZZ_LOG         the gateway's log level (default error)
//
// A round is reproducible from its seed and index (the scripts are; the
// interleaving of clients is not, so a divergence that depends on timing may
// need a few runs).
//
// # The clients
//
// Each client is a raw MySQL protocol client built on package wire (see
// client.go), so that every packet can be compared. Through the gateway it
// logs in as the gateway's user; directly, as the MariaDB account the
// gateway itself uses; always with its own database fz<N> as default
// database. A client uses the classic EOF protocol or
// CLIENT_DEPRECATE_EOF, with or without CLIENT_MULTI_STATEMENTS (and may
// switch them with COM_SET_OPTION), sometimes CLIENT_FOUND_ROWS, and one of
// four handshake collations. Every client works in its own databases fz<N>
// and fz<N>b (recreated before each phase, with the same names in both
// phases so that metadata matches) and on lock names of its own, so that
// what it sees directly does not depend on the other clients or on timing.
// The two phases never run at the same time.
//
// # What is compared
//
// For every step of every client, every result in order:
//   - OK packets: affected rows, last insert id, warnings, info string and
//     the status flags of statusMask (IN_TRANS, AUTOCOMMIT, MORE_RESULTS,
//     DB_DROPPED, NO_BACKSLASH_ESCAPES, IN_TRANS_READONLY and the others
//     that do not depend on plans or timing);
//   - ERR packets: code, SQLSTATE and message, with connection and
//     statement ids in the message replaced by <id>;
//   - EOF packets (classic protocol): warnings and status flags;
//   - result sets, text and binary protocol: the column definition packets
//     and the row packets byte for byte;
//   - COM_STMT_PREPARE answers: parameter and column counts, warnings, and
//     the definition packets; never the statement id;
//   - a connection the server closed.
//
// # The grammar
//
// Scripts are 8 to 24 steps drawn from weighted rules (gen.go), with
// pauses between steps of 0, 1 ms or 60-120 ms (longer than the gateway's
// 50 ms hold of a connection after a write, so that other clients take the
// pooled connection): user variables (SET @v, SELECT ... INTO @v, @v := );
// session variables (sql_mode, time_zone, SET NAMES / CHARACTER SET,
// max_statement_time, div_precision_increment, autocommit, in all scope
// spellings) and statements whose results show them; isolation levels for
// the session (SET SESSION TRANSACTION, tx_isolation) and for the next
// transaction only (SET TRANSACTION, SET @@tx_isolation); USE and
// COM_INIT_DB between the client's two databases, dropping and recreating
// the second; temporary tables, also one shadowing a base table; GET_LOCK
// (also back-quoted), RELEASE_LOCK, IS_FREE_LOCK, IS_USED_LOCK; SQL PREPARE,
// EXECUTE, DEALLOCATE; CALL of a procedure, a stored function and a trigger
// that set user variables, and reads of those variables by clients that
// never set them (another client's value there is a leak); INSERT into
// auto-increment tables, with explicit ids, LAST_INSERT_ID(), ROW_COUNT(),
// SQL_CALC_FOUND_ROWS and FOUND_ROWS(); transactions (BEGIN, START
// TRANSACTION [READ ONLY|READ WRITE], COMMIT, ROLLBACK, AND CHAIN,
// savepoints, COMMIT/ROLLBACK RELEASE only as a script's last step);
// statements with warnings followed by SHOW WARNINGS, @@warning_count or
// SHOW COUNT(*) WARNINGS; multi-statement queries; the binary protocol
// (prepare, execute, close in one step, or statements kept open across
// steps), including a text INSERT followed by a prepared INSERT ... VALUES
// (LAST_INSERT_ID()) and prepared reads of LAST_INSERT_ID() and of user and
// system variables.
//
// Isolation for one transaction is observed with a second, "side"
// connection of the client, always straight to MariaDB: it inserts a row
// into the client's table side without committing while the client counts
// the rows of side (StepObserve); the count is 1 only under READ
// UNCOMMITTED. The side connection is straight to MariaDB in both phases
// because through a pool of one connection a second gateway session
// holding a transaction would wait for the first forever.
//
// # What is not compared, and what is left out
//
//   - Statement ids, connection ids, the greeting (server version,
//     capabilities), and the status flags NO_GOOD_INDEX_USED,
//     NO_INDEX_USED, QUERY_WAS_SLOW and SESSION_STATE_CHANGED.
//   - Nondeterministic values (CONNECTION_ID(), NOW(), RAND()) are never
//     selected; IS_USED_LOCK is compared with CONNECTION_ID() of the same
//     statement instead.
//   - Session tracking data: the clients do not ask for
//     CLIENT_SESSION_TRACK.
//   - Cursors (COM_STMT_FETCH), COM_STMT_SEND_LONG_DATA, COM_CHANGE_USER,
//     COM_RESET_CONNECTION, LOAD DATA, replicas and the owner are not
//     exercised.
//   - KILL QUERY (StepKill) is optional (DIFFFUZZ_KILL=1): the client runs
//     SELECT SLEEP(3), waits until MariaDB shows it running, then sends
//     KILL QUERY with the id its main connection got in the handshake (the
//     gateway's session id through the gateway, which is what KILL takes
//     there; CONNECTION_ID() through the gateway is the backend's id) from
//     a second connection over the same path. It is off by default because
//     its outcome through a pool of one or two connections depends on
//     whether the gateway finds a free connection to send the kill on, and
//     a kill that does not land costs the whole SLEEP.
package difffuzz
