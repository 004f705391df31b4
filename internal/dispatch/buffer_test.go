package dispatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
)

// newTestBuffer returns a buffer for prio's lanes and a function that makes
// deliveries of lane's jobs with the given ids.
func newTestBuffer(t *testing.T, prio priority.Config) (*laneBuffer, func(lane string, ids ...string) []queue.Delivery) {
	t.Helper()
	sched, err := priority.NewScheduler(prio)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range prio.Lanes {
		names = append(names, l.Name)
	}
	q := newMemQueue(names...)
	mk := func(lane string, ids ...string) []queue.Delivery {
		var ds []queue.Delivery
		for _, id := range ids {
			ds = append(ds, &memDelivery{q: q, job: job(id, lane, "x")})
		}
		return ds
	}
	return newLaneBuffer(names, sched), mk
}

// ids returns the job ids of ds.
func ids(ds []queue.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Job().ID)
	}
	return out
}

// dueIDs returns the job ids of xs.
func dueIDs(xs []due) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.d.Job().ID)
	}
	return out
}

// pickAll picks until the buffer is empty and returns the ids in order.
func pickAll(b *laneBuffer) []string {
	var out []string
	for {
		d, ok := b.pick()
		if !ok {
			return out
		}
		out = append(out, d.Job().ID)
	}
}

func TestLaneBufferPick(t *testing.T) {
	weighted := twoLanes
	weighted.Policy = priority.Weighted
	for _, tt := range []struct {
		name     string
		prio     priority.Config
		vip, def []string
		want     []string
	}{
		{"empty", twoLanes, nil, nil, nil},
		{"one lane, FIFO", twoLanes, nil, []string{"d1", "d2", "d3"}, []string{"d1", "d2", "d3"}},
		{"strict: vip first", twoLanes, []string{"v1", "v2"}, []string{"d1", "d2"}, []string{"v1", "v2", "d1", "d2"}},
		{"weighted 8:2 shares slots", weighted,
			[]string{"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10"}, []string{"d1", "d2", "d3"},
			nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, mk := newTestBuffer(t, tt.prio)
			now := time.Unix(1000, 0)
			b.stock(0, mk("vip", tt.vip...), now)
			b.stock(1, mk("default", tt.def...), now)
			got := pickAll(b)
			if tt.want != nil || len(tt.vip)+len(tt.def) == 0 {
				if !slices.Equal(got, tt.want) {
					t.Errorf("picked %v, want %v", got, tt.want)
				}
				return
			}
			// Weighted: every job once, each lane in FIFO order, and the
			// default lane gets a slot before vip runs out.
			if len(got) != len(tt.vip)+len(tt.def) {
				t.Fatalf("picked %v, want each of the %d jobs once", got, len(tt.vip)+len(tt.def))
			}
			if i := slices.Index(got, "d1"); i < 0 || i >= len(tt.vip) {
				t.Errorf("picked %v; want d1 among the first %d (weighted, not strict)", got, len(tt.vip))
			}
		})
	}
}

func TestLaneBufferPutBackGoesFirst(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	now := time.Unix(1000, 0)
	b.stock(1, mk("default", "d1", "d2"), now)
	b.stock(0, mk("vip", "v1"), now)
	d, _ := b.pick() // v1
	e, _ := b.pick() // d1
	if !b.putBack(e) || !b.putBack(d) {
		t.Fatal("putBack of a held lane's job = false, want true")
	}
	if got, want := pickAll(b), []string{"v1", "d1", "d2"}; !slices.Equal(got, want) {
		t.Errorf("after putting back v1 and d1, picked %v, want %v", got, want)
	}
	if b.putBack(mk("bulk", "x")[0]) {
		t.Error("putBack of an unknown lane's job = true, want false")
	}
	if n := b.len(0) + b.len(1); n != 0 {
		t.Errorf("buffer holds %d jobs after an unknown lane's putBack, want 0", n)
	}
}

func TestLaneBufferDrain(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	now := time.Unix(1000, 0)
	b.stock(1, mk("default", "d1", "d2"), now)
	b.stock(0, mk("vip", "v1"), now)
	if got, want := ids(b.drain()), []string{"v1", "d1", "d2"}; !slices.Equal(got, want) {
		t.Errorf("drain = %v, want %v", got, want)
	}
	if got := ids(b.drain()); len(got) != 0 {
		t.Errorf("second drain = %v, want nothing", got)
	}
	if _, ok := b.pick(); ok {
		t.Error("pick after drain found a job")
	}
}

func TestLaneBufferWaitForRoom(t *testing.T) {
	for _, tt := range []struct {
		held, target int
		want         int // -1: blocks
	}{
		{0, 1, 1}, {0, 8, 8}, {3, 8, 5}, {4, 8, 4}, {5, 8, -1}, {8, 8, -1}, {1, 1, -1}, {2, 3, -1}, {1, 3, 2},
	} {
		b, mk := newTestBuffer(t, twoLanes)
		var idsHeld []string
		for k := range tt.held {
			idsHeld = append(idsHeld, string(rune('a'+k)))
		}
		b.stock(1, mk("default", idsHeld...), time.Unix(1000, 0))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		got, err := b.waitForRoom(ctx, 1, tt.target)
		cancel()
		switch {
		case tt.want < 0 && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("holding %d of %d: waitForRoom = %d, %v; want it to block until ctx ends", tt.held, tt.target, got, err)
		case tt.want >= 0 && (err != nil || got != tt.want):
			t.Errorf("holding %d of %d: waitForRoom = %d, %v; want %d", tt.held, tt.target, got, err, tt.want)
		}
	}
}

// A pick that brings a lane down to half its target wakes its waiter.
func TestLaneBufferPickMakesRoom(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	b.stock(1, mk("default", "d1", "d2", "d3"), time.Unix(1000, 0))
	got := make(chan int, 1)
	go func() {
		n, _ := b.waitForRoom(context.Background(), 1, 4)
		got <- n
	}()
	b.pick()
	select {
	case n := <-got:
		if n != 2 {
			t.Errorf("waitForRoom after a pick = %d, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitForRoom still blocked 10s after a pick left the lane at half its target")
	}
}

func TestLaneBufferWaitReady(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.waitReady(ctx) {
		t.Error("waitReady on an empty buffer with an ended ctx = true, want false")
	}
	done := make(chan bool, 1)
	go func() { done <- b.waitReady(context.Background()) }()
	b.stock(0, mk("vip", "v1"), time.Unix(1000, 0))
	select {
	case ok := <-done:
		if !ok {
			t.Error("waitReady after a stock = false, want true")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitReady still blocked 10s after a job was stocked")
	}
}

func TestLaneBufferStale(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	t0 := time.Unix(1000, 0)
	age := 10 * time.Second
	b.stock(1, mk("default", "d1"), t0)
	b.stock(0, mk("vip", "v1"), t0.Add(5*time.Second))
	for _, tt := range []struct {
		at   time.Duration
		want []string
	}{
		{0, nil},
		{9 * time.Second, nil},
		{10 * time.Second, []string{"d1"}},       // d1 is extended at t0+10s
		{15 * time.Second, []string{"v1"}},       // v1 is extended at t0+15s
		{19 * time.Second, nil},                  // both fresh
		{25 * time.Second, []string{"v1", "d1"}}, // highest lane first
	} {
		if got := dueIDs(b.stale(t0.Add(tt.at), age)); !slices.Equal(got, tt.want) {
			t.Errorf("stale at t0+%s = %v, want %v", tt.at, got, tt.want)
		}
	}
	d, _ := b.pick() // v1
	b.putBack(d)
	// When a put-back job was last extended is not known (its request may
	// have been open for long): the next call returns it, whatever its age.
	if got, want := dueIDs(b.stale(t0.Add(26*time.Second), age)), []string{"v1"}; !slices.Equal(got, want) {
		t.Errorf("stale right after v1 was put back = %v, want %v", got, want)
	}
	if got, want := dueIDs(b.stale(t0.Add(35*time.Second), age)), []string{"d1"}; !slices.Equal(got, want) {
		t.Errorf("stale at t0+35s = %v, want %v (v1 counts from its extension at t0+26s)", got, want)
	}
}

func TestOpenRequestsStale(t *testing.T) {
	var o openRequests
	_, mk := newTestBuffer(t, twoLanes)
	t0 := time.Unix(1000, 0)
	age := 10 * time.Second
	if got := dueIDs(o.stale(t0, age)); len(got) != 0 {
		t.Errorf("stale of an empty set = %v, want none", got)
	}
	a := o.add(mk("vip", "a")[0])
	if got, want := dueIDs(o.stale(t0, age)), []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("stale right after a was added = %v, want %v (not known when last extended)", got, want)
	}
	b := o.add(mk("vip", "b")[0])
	for _, tt := range []struct {
		at   time.Duration
		want []string
	}{
		{time.Second, []string{"b"}},
		{9 * time.Second, nil},
		{10 * time.Second, []string{"a"}},
		{11 * time.Second, []string{"b"}},
		{12 * time.Second, nil},
	} {
		got := dueIDs(o.stale(t0.Add(tt.at), age))
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("stale at t0+%s = %v, want %v", tt.at, got, tt.want)
		}
	}
	o.remove(a)
	if got, want := dueIDs(o.stale(t0.Add(time.Hour), age)), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("stale after a was removed = %v, want %v", got, want)
	}
	o.remove(b)
	o.remove(b) // a second call removes nothing more
	if n := o.len(); n != 0 {
		t.Errorf("set holds %d after both were removed, want 0", n)
	}
}

// A job whose Extend failed is returned again by the next call of stale,
// not a whole age later: restamp clears its stamp. Jobs
// extended in the same round, and a job picked and put back meanwhile,
// keep theirs.
func TestLaneBufferRestamp(t *testing.T) {
	b, mk := newTestBuffer(t, twoLanes)
	t0 := time.Unix(1000, 0)
	age := 10 * time.Second
	b.stock(1, mk("default", "d1", "d2"), t0)
	b.stock(0, mk("vip", "v1"), t0)
	round := b.stale(t0.Add(10*time.Second), age)
	if got, want := dueIDs(round), []string{"v1", "d1", "d2"}; !slices.Equal(got, want) {
		t.Fatalf("stale at t0+10s = %v, want %v", got, want)
	}
	d, _ := b.pick() // v1, to be put back under a new key
	b.putBack(d)
	b.stale(t0.Add(10*time.Second), age) // v1, put back, is returned and stamped
	failed := []due{round[0], round[2]}  // v1's old key, and d2
	b.restamp(failed)
	if got, want := dueIDs(b.stale(t0.Add(11*time.Second), age)), []string{"d2"}; !slices.Equal(got, want) {
		t.Errorf("stale one round after d2's Extend failed = %v, want %v", got, want)
	}
	if got := dueIDs(b.stale(t0.Add(12*time.Second), age)); len(got) != 0 {
		t.Errorf("stale after d2 was extended again = %v, want none", got)
	}
	b.restamp(nil) // nothing failed: nothing changes
	if got, want := dueIDs(b.stale(t0.Add(20*time.Second), age)), []string{"v1", "d1"}; !slices.Equal(got, want) {
		t.Errorf("stale at t0+20s = %v, want %v (d2 counts from t0+11s)", got, want)
	}
}

// An open request whose Extend failed is returned again by the next call
// of stale; one removed meanwhile is not brought back.
func TestOpenRequestsRestamp(t *testing.T) {
	var o openRequests
	_, mk := newTestBuffer(t, twoLanes)
	t0 := time.Unix(1000, 0)
	age := 10 * time.Second
	a := o.add(mk("vip", "a")[0])
	o.add(mk("vip", "b")[0])
	o.stale(t0, age) // both, stamped t0
	round := o.stale(t0.Add(10*time.Second), age)
	slices.SortFunc(round, func(x, y due) int { return strings.Compare(x.d.Job().ID, y.d.Job().ID) })
	if got, want := dueIDs(round), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("stale at t0+10s = %v, want %v", got, want)
	}
	o.remove(a)
	o.restamp(round) // both failed; a is no longer open
	if got, want := dueIDs(o.stale(t0.Add(11*time.Second), age)), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("stale one round after the failed Extends = %v, want %v", got, want)
	}
	if n := o.len(); n != 1 {
		t.Errorf("set holds %d after restamp, want 1 (a stays removed)", n)
	}
}
