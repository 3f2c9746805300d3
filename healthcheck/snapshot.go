package healthcheck

import "time"

// State is whether a backend may be given traffic.
type State int

const (
	// StateUnknown is the state of a backend that has not yet had Rise
	// good or Fall failed probes in a row since it became known.
	StateUnknown State = iota
	// StateServing means the last Rise (or more) probes were good.
	StateServing
	// StateNotServing means Fall probes in a row failed, or a caller
	// reported a failure and Rise good probes have not followed since.
	StateNotServing
)

// String returns "unknown", "serving" or "not_serving".
func (s State) String() string {
	switch s {
	case StateServing:
		return "serving"
	case StateNotServing:
		return "not_serving"
	default:
		return "unknown"
	}
}

// Role is what a backend does in its cluster, as of a snapshot.
type Role int

const (
	// RoleNone is the role of a backend that is not serving.
	RoleNone Role = iota
	// RolePrimary is the one serving writable backend of its cluster.
	RolePrimary
	// RoleReplica is a serving read-only backend.
	RoleReplica
	// RoleSplitBrain is a serving writable backend in a cluster with more
	// than one: none of them is used as primary.
	RoleSplitBrain
)

// String returns "none", "primary", "replica" or "split_brain".
func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleReplica:
		return "replica"
	case RoleSplitBrain:
		return "split_brain"
	default:
		return "none"
	}
}

// BackendView is the state of one backend in a Snapshot.
type BackendView struct {
	Backend
	// State is the backend's state after hysteresis.
	State State
	// Reason says why the backend is in State (for example the last probe
	// error), empty when serving.
	Reason string
	// Since is when the backend entered State.
	Since time.Time
	// Role is the backend's role in its cluster.
	Role Role
	// Last is the most recent probe result (zero before the first probe).
	Last Result
	// LastProbe is when Last was received (zero before the first probe).
	LastProbe time.Time
	// Slow is set while the backend's probe round trip is above its
	// cluster's Config.MaxLatency (with the Rise/Fall hysteresis):
	// readers give a slow replica no reads. It says nothing of State.
	Slow bool
}

// Cluster is the state of one cluster in a Snapshot.
type Cluster struct {
	// Name is the cluster name (Backend.Cluster).
	Name string
	// Primary is the address of the primary, or "" when there is none.
	Primary string
	// NoPrimaryReason says why Primary is empty; empty when there is one.
	NoPrimaryReason string
	// SplitBrain is true when more than one serving backend is writable.
	// No primary is chosen then; writes must be refused.
	SplitBrain bool
	// Writable lists the serving writable backends, sorted by address:
	// one in the normal case, several in split brain.
	Writable []string
	// Replicas lists the serving read-only backends, fastest last probe
	// RTT first (address breaks ties).
	Replicas []string
	// Backends lists every backend of the cluster, sorted by address.
	Backends []string
}

// Snapshot is an immutable picture of every backend, published by the
// Observer after each round and after each ReportFailure. Nothing in it,
// maps and slices included, may be modified by readers.
type Snapshot struct {
	// Round counts completed probe rounds; 0 before the first.
	Round uint64
	// Time is when the snapshot was built.
	Time time.Time
	// Clusters maps cluster name to its state.
	Clusters map[string]*Cluster
	// Backends maps backend address to its state.
	Backends map[string]*BackendView

	// changed is closed when a newer snapshot is published.
	changed chan struct{}
}

// Changed returns a channel that is closed when a newer snapshot replaces
// this one, for callers waiting for a change (a primary to appear).
func (s *Snapshot) Changed() <-chan struct{} { return s.changed }

// Backend returns the view of the backend at addr, or nil if it is not
// known.
func (s *Snapshot) Backend(addr string) *BackendView {
	if s == nil {
		return nil
	}
	return s.Backends[addr]
}

// Cluster returns the view of the named cluster, or nil if it is not known.
func (s *Snapshot) Cluster(name string) *Cluster {
	if s == nil {
		return nil
	}
	return s.Clusters[name]
}
