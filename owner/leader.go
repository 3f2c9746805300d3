package owner

import (
	"github.com/directgate/directgate/wire"
)

// staticTerm is the term of an owner without election: it always leads.
const staticTerm = 1

// leading returns the term a statement runs in, or, on a standby, the
// error that refuses it.
func (o *Owner) leading() (uint64, *wire.SQLError) {
	if o.lead == nil {
		return staticTerm, nil
	}
	if term := o.lead.Term(); term != 0 && o.lead.Valid(term) {
		return term, nil
	}
	return 0, o.standbyError()
}

// stillLeading reports whether term still holds: checked right before a
// sequence value is handed out.
func (o *Owner) stillLeading(term uint64) bool {
	return o.lead == nil || o.lead.Valid(term)
}

// active reports whether this owner leads now: message queues poll and
// deliver only then.
func (o *Owner) active() bool {
	_, err := o.leading()
	return err == nil
}

// leadTerm returns the term this owner leads in and whether it leads
// now: what message queues act in.
func (o *Owner) leadTerm() (uint64, bool) {
	term, err := o.leading()
	return term, err == nil
}

// standbyError refuses a statement (or a login) on a standby, naming the
// leader. It is ER_OPTION_PREVENTS_STATEMENT, as a read-only server
// refuses a write: nothing ran, and gateways that follow the election
// send the statement to the leader instead.
func (o *Owner) standbyError() *wire.SQLError {
	leader, _ := o.lead.Leader()
	switch {
	case leader == "":
		leader = "not elected yet"
	case leader == o.listen:
		leader += " (this process, whose leadership lapsed: it campaigns again)"
	}
	return wire.NewError(wire.ErOptionPreventsStatement, "HY000",
		"The owner of cluster %s at %s is running as a standby so it cannot execute this statement; the leader is %s",
		o.cluster, o.listen, leader)
}

// lostLeadershipError answers a statement whose term ended while it ran,
// before it handed anything out (a sequence block may have been reserved:
// a gap, never a duplicate). Like standbyError it lets a gateway send the
// statement to the new leader.
func (o *Owner) lostLeadershipError() *wire.SQLError {
	return wire.NewError(wire.ErOptionPreventsStatement, "HY000",
		"The owner of cluster %s at %s lost its leadership while running this statement, so it cannot execute it; nothing was handed out, run it again (gateways send it to the new leader)",
		o.cluster, o.listen)
}

// watchLeadership follows the election: a new term empties the message
// caches (the last leader's deliveries changed the tables) and polls,
// and raises the fence row of every table to the new term (fence.go); a
// term's end ends every stream, whose clients STREAM again through a
// gateway, which sends them to the new leader. Sequence blocks need
// nothing: they are bound to their term (blockGen).
func (o *Owner) watchLeadership() {
	var last uint64
	if o.lead.Term() == 0 {
		o.log.Info("standing by: another owner leads or the election is under way", "cluster", o.cluster)
	}
	for {
		changed := o.lead.Changed()
		term := o.lead.Term()
		if term != last {
			if last != 0 {
				o.log.Warn("no longer leading: standing by; streams end, statements are refused", "cluster", o.cluster, "term", last)
				reason := wire.NewError(wire.ErOptionPreventsStatement, "HY000",
					"The owner of cluster %s at %s is no longer the leader; STREAM again (gateways send it to the new leader)", o.cluster, o.listen)
				o.eachQueue(func(q *queue) { q.endSubscriptions(reason) })
			}
			if term != 0 {
				o.log.Info("leading: serving sequences and messages", "cluster", o.cluster, "term", term)
				o.bgGroup.Go("owner fence raise", func() { o.raiseFences(term) })
				o.eachQueue((*queue).reset)
			}
			last = term
		}
		select {
		case <-changed:
		case <-o.ctx.Done():
			return
		}
	}
}

// eachQueue calls fn for the queue of every message table.
func (o *Owner) eachQueue(fn func(*queue)) {
	for _, t := range o.tables.Load().list {
		if t.queue != nil {
			fn(t.queue)
		}
	}
}
