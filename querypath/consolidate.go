package querypath

// Deterministic reports whether the query sql (a SELECT, WITH, VALUES or
// parenthesized query) gives the same
// result to every session that runs it at the same moment with the same
// database, session variables and account: it calls no function whose
// value depends on the moment, on chance or on the session (NOW(),
// CURRENT_TIMESTAMP, RAND(), UUID(), CONNECTION_ID(), LAST_INSERT_ID(),
// FOUND_ROWS(), ROW_COUNT(), SLEEP(), GET_LOCK(), NEXTVAL(), USER(), ...)
// and reads no user or system variable (@x, @@x). For query
// consolidation, which answers identical reads in flight together with
// one result.
//
// It errs on the safe side: a function it does not know to be a
// deterministic built-in (a stored function, which may write or read the
// clock; a qualified name db.f(); a quoted name) makes it false, and so
// does a batch, an assignment or text it cannot lex to its end. It lexes
// sql once (twice with executable comments, when it allocates); call it
// only when consolidation is on. noBackslash says the session's sql_mode
// has NO_BACKSLASH_ESCAPES.
// The caller checks the rest (a read, not locking, not pinning): see
// Route.
func Deterministic(sql string, noBackslash bool) bool {
	// Read as the server reads it (noBackslash: the session's sql_mode has
	// NO_BACKSLASH_ESCAPES), with executable comments as plain comments
	// and as code: both readings must agree.
	if !deterministic(sql, noBackslash) {
		return false
	}
	return !hasExecComment(sql) || deterministic(expandComments(sql, noBackslash), noBackslash)
}

// deterministic is Deterministic on the text as lexed (noBackslash: with
// NO_BACKSLASH_ESCAPES).
func deterministic(sql string, noBackslash bool) bool {
	l := lexer{s: sql, noBackslash: noBackslash}
	var p2, p1 token // the two previous tokens
	ended := false   // a ';' was seen: only more of them may follow
	for i := 0; ; i++ {
		t := l.next()
		if i == 0 && !(l.is(t, "SELECT") || l.is(t, "WITH") || l.is(t, "VALUES") || isPunct(t, '(')) {
			return false // SHOW, DESCRIBE, EXPLAIN, ...: not queries of the data
		}
		if t.kind == tkEOF {
			return !l.unterminated
		}
		if ended && !isPunct(t, ';') {
			return false // a batch: the caller runs it
		}
		switch t.kind {
		case tkUserVar, tkSysVar, tkAssign, tkParam:
			return false
		case tkIdent:
			w := sql[t.start:t.end]
			if volatileWord(w) || kwEq(w, "FOR") && l.is(p1, "VALUE") {
				return false // ... or NEXT|PREVIOUS VALUE FOR s
			}
		case tkPunct:
			switch t.ch() {
			case ';':
				ended = true
			case '(':
				switch {
				case p1.kind == tkQuoted:
					return false // `f`(...): a stored function, or a built-in hidden by quotes
				case p1.kind == tkIdent && isPunct(p2, '.'):
					return false // db.f(...): a stored function
				case p1.kind == tkIdent && !deterministicCall(sql[p1.start:p1.end]):
					return false
				}
			}
		}
		p2, p1 = p1, t
	}
}

// volatileWord reports whether the word w, with or without parentheses
// after it, names a value of the moment or of the session.
func volatileWord(w string) bool {
	switch len(w) {
	case 8:
		return kwEq(w, "UTC_DATE") || kwEq(w, "UTC_TIME")
	case 9:
		return kwEq(w, "LOCALTIME")
	case 12:
		return kwEq(w, "CURRENT_DATE") || kwEq(w, "CURRENT_TIME") || kwEq(w, "CURRENT_USER") || kwEq(w, "CURRENT_ROLE")
	case 13:
		return kwEq(w, "UTC_TIMESTAMP")
	case 14:
		return kwEq(w, "LOCALTIMESTAMP")
	case 17:
		return kwEq(w, "CURRENT_TIMESTAMP")
	}
	return false
}

// deterministicCall reports whether name( is a keyword followed by a
// parenthesis or a built-in function whose value depends only on its
// arguments, the data read and the session variables. Unknown names are
// not: they may be stored functions.
func deterministicCall(name string) bool {
	if len(name) > maxCallName {
		return false
	}
	var b [maxCallName]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		b[i] = c
	}
	return deterministicCalls[string(b[:len(name)])]
}

// maxCallName is the longest name in deterministicCalls.
const maxCallName = 24

// deterministicCalls are the words that may come before '(' in a
// consolidable read: keywords, and deterministic built-in functions. It
// is read-only.
var deterministicCalls = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		// Keywords followed by a parenthesis.
		"SELECT", "FROM", "JOIN", "ON", "USING", "AS", "WHERE", "AND", "OR", "NOT", "XOR", "IN",
		"EXISTS", "ALL", "ANY", "SOME", "OVER", "VALUES", "VALUE", "WITH", "UNION", "EXCEPT", "INTERSECT",
		"HAVING", "BY", "WHEN", "THEN", "ELSE", "IS", "LIKE", "BETWEEN", "DISTINCT", "ROW", "LATERAL",
		"INTERVAL", "BINARY", "DIV", "MOD", "CASE", "KEY", "INDEX", "FORCE", "IGNORE", "USE",
		"PARTITION", "LIMIT", "OFFSET", "RETURNING", "STRAIGHT_JOIN", "REGEXP", "RLIKE", "ESCAPE",
		// Aggregate and window functions.
		"COUNT", "SUM", "MIN", "MAX", "AVG", "GROUP_CONCAT", "STD", "STDDEV", "STDDEV_POP",
		"STDDEV_SAMP", "VARIANCE", "VAR_POP", "VAR_SAMP", "BIT_AND", "BIT_OR", "BIT_XOR",
		"JSON_ARRAYAGG", "JSON_OBJECTAGG", "ROW_NUMBER", "RANK", "DENSE_RANK", "PERCENT_RANK",
		"CUME_DIST", "LAG", "LEAD", "FIRST_VALUE", "LAST_VALUE", "NTH_VALUE", "NTILE",
		// Control flow and comparison.
		"IF", "IFNULL", "NULLIF", "COALESCE", "ISNULL", "GREATEST", "LEAST", "INTERVAL",
		// Strings.
		"CONCAT", "CONCAT_WS", "LOWER", "UPPER", "LCASE", "UCASE", "LENGTH", "CHAR_LENGTH",
		"CHARACTER_LENGTH", "OCTET_LENGTH", "BIT_LENGTH", "SUBSTRING", "SUBSTR", "MID",
		"SUBSTRING_INDEX", "LEFT", "RIGHT", "TRIM", "LTRIM", "RTRIM", "REPLACE", "REVERSE",
		"REPEAT", "LPAD", "RPAD", "INSTR", "LOCATE", "POSITION", "FIELD", "FIND_IN_SET", "ELT",
		"HEX", "UNHEX", "MD5", "SHA1", "SHA", "SHA2", "CRC32", "ASCII", "ORD", "CHAR", "SPACE",
		"FORMAT", "QUOTE", "STRCMP", "SOUNDEX", "REGEXP_REPLACE", "REGEXP_SUBSTR", "REGEXP_INSTR",
		"TO_BASE64", "FROM_BASE64", "COLLATE", "CHARSET", "COLLATION", "WEIGHT_STRING",
		// Numbers.
		"ABS", "CEIL", "CEILING", "FLOOR", "ROUND", "TRUNCATE", "POW", "POWER", "SQRT", "EXP",
		"LN", "LOG", "LOG2", "LOG10", "SIGN", "PI", "SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN",
		"ATAN2", "COT", "DEGREES", "RADIANS", "CONV", "BIN", "OCT",
		// Types.
		"CAST", "CONVERT", "DECIMAL", "SIGNED", "UNSIGNED", "DOUBLE", "FLOAT", "INT", "INTEGER",
		"VARCHAR",
		// Dates of a value (not of the moment; time_zone is a session
		// variable, which the caller compares).
		"DATE", "TIME", "TIMESTAMP", "DATETIME", "YEAR", "MONTH", "DAY", "DAYOFMONTH", "DAYOFWEEK",
		"DAYOFYEAR", "WEEK", "WEEKDAY", "WEEKOFYEAR", "YEARWEEK", "QUARTER", "HOUR", "MINUTE",
		"SECOND", "MICROSECOND", "DATE_FORMAT", "TIME_FORMAT", "DATE_ADD", "DATE_SUB", "ADDDATE",
		"SUBDATE", "ADDTIME", "SUBTIME", "DATEDIFF", "TIMEDIFF", "TIMESTAMPDIFF", "TIMESTAMPADD",
		"STR_TO_DATE", "FROM_UNIXTIME", "EXTRACT", "LAST_DAY", "MAKEDATE", "MAKETIME", "TO_DAYS",
		"FROM_DAYS", "TO_SECONDS", "SEC_TO_TIME", "TIME_TO_SEC", "MONTHNAME", "DAYNAME",
		"CONVERT_TZ", "PERIOD_ADD", "PERIOD_DIFF",
		// JSON.
		"JSON_EXTRACT", "JSON_VALUE", "JSON_QUERY", "JSON_UNQUOTE", "JSON_QUOTE", "JSON_OBJECT",
		"JSON_ARRAY", "JSON_CONTAINS", "JSON_CONTAINS_PATH", "JSON_LENGTH", "JSON_KEYS",
		"JSON_TYPE", "JSON_VALID", "JSON_SEARCH", "JSON_DEPTH", "JSON_SET", "JSON_INSERT",
		"JSON_REPLACE", "JSON_REMOVE", "JSON_MERGE", "JSON_MERGE_PATCH", "JSON_MERGE_PRESERVE",
		"JSON_COMPACT", "JSON_DETAILED", "JSON_EXISTS",
		// Full text, and the session's database (compared by the caller).
		"MATCH", "AGAINST", "DATABASE", "SCHEMA",
	} {
		if len(w) > maxCallName {
			panic("querypath: deterministic call name too long: " + w)
		}
		m[w] = true
	}
	return m
}()
