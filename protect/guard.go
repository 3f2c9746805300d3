package protect

import (
	"github.com/directgate/directgate/config"
	"github.com/directgate/directgate/wire"
)

// Set is one cluster's protections, in the order a statement meets
// them. Made once per cluster; its policies keep the cluster's
// counters and queues.
type Set struct {
	cluster  string
	policies []Policy
}

// NewSet returns the protections of cluster, met in the order given.
// At most 32 policies.
func NewSet(cluster string, policies ...Policy) *Set {
	if len(policies) > 32 {
		panic("protect: more than 32 policies")
	}
	return &Set{cluster: cluster, policies: policies}
}

// Policies returns the set's policies.
func (s *Set) Policies() []Policy { return s.policies }

// Rows returns every policy's counters under settings conf, with
// Protection and Cluster filled in, and without rates.
func (s *Set) Rows(conf *config.Cluster) []Row {
	var rows []Row
	for _, p := range s.policies {
		for _, r := range p.Rows(conf) {
			r.Protection, r.Cluster = p.Name(), s.cluster
			rows = append(rows, r)
		}
	}
	return rows
}

// Guard is a session's part in the protections: the one value a session
// holds for all of them, passed the cluster's Set at each point (a
// session's statements may go to several clusters). Only the session's
// goroutine uses it. The zero value is ready once Bind has given it its
// session.
type Guard struct {
	s Session
	// choose says Chosen is still to be asked for the statement being
	// routed, and choice is that statement.
	choose bool
	choice Choice
	// kind is what the answer being exchanged is (Ending).
	kind wire.ResponseKind
	// hot is the session's part in hot-row protection (hotrow.go).
	hot hotSession
	// throttled says the open transaction went through transaction
	// throttling: its later statements are not throttled.
	throttled bool
	// wrote says the statement being exchanged may change data: its end
	// moves consolidation's write count (consolidation.go).
	wrote bool
	// st is the statement being admitted (Statement).
	st Statement
}

// Statement returns the Guard's statement, zeroed, for the session to
// fill and Admit: one per session, so admitting allocates nothing.
func (g *Guard) Statement() *Statement {
	g.st = Statement{}
	return &g.st
}

// Bind gives g its session.
func (g *Guard) Bind(s Session) { g.s = s }

// Admit is the statement-admitted point: every policy of set, in order,
// until one refuses; its error is the client's answer.
func (g *Guard) Admit(set *Set, st *Statement) *wire.SQLError {
	for _, p := range set.policies {
		if e := p.Admit(g, st); e != nil {
			return e
		}
	}
	return nil
}

// Choosing says that a backend is about to be chosen for statement c:
// first says it is not a retry, and the next Chosen asks the policies.
func (g *Guard) Choosing(c Choice, first bool) {
	g.choose, g.choice = first, c
}

// Chosen is the backend-chosen point: once per Choosing with first,
// every policy of set, in order, until one refuses.
func (g *Guard) Chosen(set *Set, conf *config.Cluster, b Backend) *wire.SQLError {
	if !g.choose {
		return nil
	}
	g.choose = false // once: not again after a dead connection or a causal wait
	for _, p := range set.policies {
		if e := p.Chosen(g, g.choice, conf, b); e != nil {
			return e
		}
	}
	return nil
}

// Chose ends the choice of a backend, whether Chosen was asked or not.
func (g *Guard) Chose() { g.choose = false }

// Ending says whether the answer of the statement being exchanged, of
// kind kind, must pass AnswerEnded before it reaches the client.
func (g *Guard) Ending(kind wire.ResponseKind) bool {
	g.kind = kind
	return g.wrote || len(g.hot.holds) > 0
}

// AnswerEnded is the answer-ended point, for a statement Ending said
// true of: every policy of set.
func (g *Guard) AnswerEnded(set *Set, res *wire.Result) {
	for _, p := range set.policies {
		p.AnswerEnded(g, res)
	}
}

// TxnEnded is the transaction-ended point: every policy of set. The
// session calls it when the server reports no open transaction (when
// InTxn says a policy keeps something for it), and when the session
// ends.
func (g *Guard) TxnEnded(set *Set) {
	if set == nil {
		return
	}
	for _, p := range set.policies {
		p.TxnEnded(g)
	}
}

// InTxn says whether a policy keeps something for the session's
// transaction: its end must be told (TxnEnded).
func (g *Guard) InTxn() bool {
	return g.throttled || len(g.hot.holds) > 0
}
