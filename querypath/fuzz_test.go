package querypath

import (
	"reflect"
	"testing"
)

// FuzzClassify checks that Classify never panics, is deterministic, and keeps
// the Route invariants, on any input.
func FuzzClassify(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add(tc.sql)
	}
	for _, s := range agreementExtra {
		f.Add(s)
	}
	for _, s := range parserStatements {
		f.Add(s)
	}
	for _, s := range tempTableExtra {
		f.Add(s)
	}
	c := classifier(f)
	f.Fuzz(func(t *testing.T, sql string) {
		r := c.Classify(sql)
		if r.Kind > KindGatewayShow {
			t.Fatalf("kind %d", r.Kind)
		}
		if r.Pin&r.Unpin != 0 {
			t.Fatalf("pin %s and unpin %s overlap", r.Pin, r.Unpin)
		}
		if (r.Pin|r.Unpin)&^(PinXA<<1-1) != 0 {
			t.Fatalf("unknown pin bits %s / %s", r.Pin, r.Unpin)
		}
		if r.Vars != nil && r.Kind != KindSet && !r.MultiStatement {
			t.Fatalf("Vars on a %s", r.Kind)
		}
		for _, v := range r.Vars {
			if v.Name == "" || v.Value == "" {
				t.Fatalf("empty SetVar %+v", v)
			}
		}
		switch r.Kind {
		case KindUse:
			if r.Database == "" {
				t.Fatal("KindUse without a database")
			}
		case KindSequence, KindStream:
			if r.Table == "" {
				t.Fatalf("%s without a table", r.Kind)
			}
		}
		checkTempTables(t, r)
		if again := c.Classify(sql); !reflect.DeepEqual(r, again) {
			t.Fatalf("not deterministic: %s then %s", describe(r), describe(again))
		}
	})
}

// FuzzFastPathIsConservative checks, on any input the fast path decides and
// the parser reads, that the fast path is at least as conservative as the
// parser: every pin the parser finds, the fast path finds; it ends no pin the
// parser would keep; and it calls nothing a read that the parser does not.
func FuzzFastPathIsConservative(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add(tc.sql)
	}
	for _, s := range agreementExtra {
		f.Add(s)
	}
	c := classifier(f)
	f.Fuzz(func(t *testing.T, sql string) {
		if hasExecComment(sql) {
			sql = expandComments(sql, false)
		}
		var st stmt
		scanStmt(&st, sql, 0, false)
		if st.more || st.unterminated || st.count == 0 {
			return
		}
		fast, ok := c.fast(&st, 0)
		if !ok {
			return
		}
		node, ok := c.parse(st.text())
		if !ok {
			return
		}
		parsed := c.astRoute(node, &st, 0)
		if missing := parsed.Pin &^ fast.Pin; missing != 0 {
			t.Fatalf("%q: fast path misses pins %s (fast %s, parser %s)", sql, missing, describe(fast), describe(parsed))
		}
		if extra := fast.Unpin &^ parsed.Unpin; extra != 0 {
			t.Fatalf("%q: fast path ends %s (fast %s, parser %s)", sql, extra, describe(fast), describe(parsed))
		}
		if fast.Kind == KindRead && parsed.Kind != KindRead {
			t.Fatalf("%q: fast path says read (fast %s, parser %s)", sql, describe(fast), describe(parsed))
		}
		if parsed.ReadsLastResult && !fast.ReadsLastResult {
			t.Fatalf("%q: fast path misses ReadsLastResult (fast %s, parser %s)", sql, describe(fast), describe(parsed))
		}
	})
}

// FuzzHotRow: HotRow never panics, and what it recognises is one
// statement, not a read, with a table and key candidates.
func FuzzHotRow(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add(tc.sql)
	}
	for _, s := range hotRowSeeds {
		f.Add(s)
	}
	c := classifier(f)
	f.Fuzz(func(t *testing.T, sql string) {
		rw, ok := c.HotRow(sql)
		if !ok {
			return
		}
		if rw.Table == "" || len(rw.Eqs) == 0 {
			t.Fatalf("HotRow(%q) = %+v", sql, rw)
		}
		for _, eq := range rw.Eqs {
			if eq.Column == "" || eq.Param < -1 || eq.Param >= 0 && eq.Value != "" {
				t.Fatalf("HotRow(%q): candidate %+v", sql, eq)
			}
		}
		if r := c.Classify(sql); r.MultiStatement || r.Kind == KindRead {
			t.Fatalf("HotRow(%q) recognised a %s (multi %v)", sql, r.Kind, r.MultiStatement)
		}
	})
}
