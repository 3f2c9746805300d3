package owner

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
)

// fakeBlocks is a sequence row in memory.
type fakeBlocks struct {
	mu             sync.Mutex
	nextID         int64
	cache          int64
	reservations   int
	fail           error // returned by the next reservation (after writing, if commitThenFail)
	commitThenFail bool
}

func (f *fakeBlocks) reserveBlock(_ context.Context, plan func(nextID, cache int64) (int64, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil && !f.commitThenFail {
		err := f.fail
		f.fail = nil
		return err
	}
	n, err := plan(f.nextID, f.cache)
	if err != nil {
		return err
	}
	f.nextID = n
	f.reservations++
	if f.fail != nil {
		err := f.fail
		f.fail, f.commitThenFail = nil, false
		return err
	}
	return nil
}

func TestPlanBlock(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		valid                        bool
		next, last, nextID, cache, n int64
		wantNext, wantLast           int64
		wantErr                      bool
	}{
		{name: "first use", nextID: 1, cache: 1000, n: 1, wantNext: 1, wantLast: 1001},
		{name: "first use, n beyond one block", nextID: 1, cache: 10, n: 25, wantNext: 1, wantLast: 31},
		{name: "continue block", valid: true, next: 995, last: 1001, nextID: 1001, cache: 1000, n: 10, wantNext: 995, wantLast: 2001},
		{name: "exact multiple", valid: true, next: 1001, last: 1001, nextID: 1001, cache: 10, n: 20, wantNext: 1001, wantLast: 1021},
		{name: "someone advanced next_id", valid: true, next: 50, last: 101, nextID: 500, cache: 100, n: 1, wantNext: 500, wantLast: 600},
		{name: "next_id went backwards", valid: true, next: 50, last: 101, nextID: 7, cache: 100, n: 1, wantNext: 101, wantLast: 201},
		{name: "invalid memory trusts the table", valid: false, next: 50, last: 101, nextID: 7, cache: 100, n: 1, wantNext: 7, wantLast: 107},
		{name: "bad cache", nextID: 1, cache: 0, n: 1, wantErr: true},
		{name: "exhausted", nextID: math.MaxInt64 - 5, cache: 10, n: 1, wantErr: true},
		{name: "n too large", nextID: 1, cache: 10, n: math.MaxInt64, wantErr: true},
		{name: "n at the bound (cache × 1000)", nextID: 1, cache: 10, n: 10000, wantNext: 1, wantLast: 10001},
		{name: "n past the bound burns nothing", nextID: 1, cache: 1, n: 1e12, wantErr: true},
	} {
		next, last, err := planBlock(tc.valid, tc.next, tc.last, tc.nextID, tc.cache, tc.n)
		if (err != nil) != tc.wantErr || err == nil && (next != tc.wantNext || last != tc.wantLast) {
			t.Errorf("%s: got [%d, %d) %v, want [%d, %d) error %v", tc.name, next, last, err, tc.wantNext, tc.wantLast, tc.wantErr)
		}
	}
}

// gen1 and gen2 are two primary generations in term 1.
var gen1, gen2 = blockGen{primary: 1, term: 1}, blockGen{primary: 2, term: 1}

func TestSequenceBlocks(t *testing.T) {
	ctx := context.Background()
	store := &fakeBlocks{nextID: 1, cache: 10}
	s := &sequence{}
	var got []int64
	for _, n := range []int64{1, 1, 5, 3, 1} {
		v, err := s.nextValues(ctx, gen1, store, n)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []int64{1, 2, 3, 8, 11}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("values %v, want %v", got, want)
		}
	}
	// 11 needed a second block: next_id 21 covers 11.
	if store.reservations != 2 || store.nextID != 21 {
		t.Fatalf("reservations %d, next_id %d; want 2, 21", store.reservations, store.nextID)
	}
	// A new primary generation: memory is not trusted, the table is.
	v, err := s.nextValues(ctx, gen2, store, 1)
	if err != nil || v != 21 || store.nextID != 31 {
		t.Fatalf("after primary change: %d (%v), next_id %d; want 21, 31", v, err, store.nextID)
	}
	if _, err := s.nextValues(ctx, gen2, store, 0); err == nil {
		t.Fatal("n = 0 accepted")
	}
}

// An owner that leads again after another led never hands out values
// from the block it held before: they are below the other's. (Strictly
// increasing values across owner failovers.)
func TestSequenceNewTerm(t *testing.T) {
	ctx := context.Background()
	store := &fakeBlocks{nextID: 1, cache: 10}
	a, b := &sequence{}, &sequence{}
	if v, err := a.nextValues(ctx, blockGen{1, 1}, store, 1); err != nil || v != 1 {
		t.Fatalf("a, term 1: %d (%v)", v, err)
	}
	if v, err := b.nextValues(ctx, blockGen{1, 2}, store, 5); err != nil || v != 11 {
		t.Fatalf("b, term 2: %d (%v), want 11", v, err)
	}
	if v, err := a.nextValues(ctx, blockGen{1, 3}, store, 1); err != nil || v != 21 {
		t.Fatalf("a, term 3: %d (%v), want 21 (after b's block, not 2 from a's old one)", v, err)
	}
}

// A reservation whose commit outcome is unknown (it committed, then the
// connection failed) must not hand out values from memory afterwards, nor
// reuse the committed block's values.
func TestSequenceFailedReservation(t *testing.T) {
	ctx := context.Background()
	store := &fakeBlocks{nextID: 1, cache: 10}
	s := &sequence{}
	if v, _ := s.nextValues(ctx, gen1, store, 10); v != 1 {
		t.Fatalf("first value %d", v)
	}
	store.fail, store.commitThenFail = errors.New("connection lost during COMMIT"), true
	if _, err := s.nextValues(ctx, gen1, store, 1); err == nil {
		t.Fatal("failed reservation reported no error")
	}
	v, err := s.nextValues(ctx, gen1, store, 1)
	if err != nil || v != 21 {
		t.Fatalf("after a failed commit: %d (%v), want 21 (the committed block [11, 21) is skipped)", v, err)
	}
	store.fail = errors.New("primary down")
	if _, err := s.nextValues(ctx, gen1, store, 100); err == nil {
		t.Fatal("no error")
	}
	if v, err := s.nextValues(ctx, gen1, store, 1); err != nil || v != 31 {
		t.Fatalf("after a refused reservation: %d (%v), want 31", v, err)
	}
}

// Many callers, two owner processes sharing one table: no value twice,
// each caller's values strictly increase.
func TestSequenceConcurrent(t *testing.T) {
	ctx := context.Background()
	store := &fakeBlocks{nextID: 1, cache: 7}
	owners := []*sequence{{}, {}}
	const callers, per = 16, 500
	results := make([][]int64, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			s := owners[c%2]
			for i := range per {
				v, err := s.nextValues(ctx, gen1, store, int64(1+i%3))
				if err != nil {
					t.Error(err)
					return
				}
				results[c] = append(results[c], v)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for c, vs := range results {
		for i, v := range vs {
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("caller %d: %d after %d", c, v, vs[i-1])
			}
			// A call for n values owns v..v+n-1.
			for k := range int64(1 + i%3) {
				if seen[v+k] {
					t.Fatalf("value %d handed out twice", v+k)
				}
				seen[v+k] = true
			}
		}
	}
}
