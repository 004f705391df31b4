package console

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pacer"
)

func TestReport(t *testing.T) {
	r := Report{Sending: 3, Held: 40, Admin: "127.0.0.1:9464", Sent: map[string]int64{"vip": 12, "default": 4000}}
	s := r.String()
	if s != "sending=3 held=40 admin=127.0.0.1:9464 sent=default:4000,vip:12" {
		t.Errorf("String: got %q", s)
	}
	back := ParseReport(s)
	if back.Sending != 3 || back.Held != 40 || back.Admin != r.Admin || back.Sent["vip"] != 12 || back.Sent["default"] != 4000 {
		t.Errorf("ParseReport(%q): got %+v", s, back)
	}
	if old := ParseReport("in_flight=7"); old.Sending != 7 {
		t.Errorf("an earlier version's report: got %+v, want Sending 7", old)
	}
}

// The achieved rate is each replica's change between its last two
// reports, summed over the live replicas; a replica that leaves drops out,
// and one whose counts went back (a restart under the same id) adds
// nothing for that interval.
func TestHistory(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	rep := func(id string, seen float64, vip, def int64) pacer.Replica {
		return pacer.Replica{ID: id, LastSeen: at(seen), Report: Report{Sent: map[string]int64{"vip": vip, "default": def}}.String()}
	}
	st := func(s float64, eff float64) *pacer.State {
		return &pacer.State{Now: at(s), ConfiguredRate: 100, EffectiveRate: eff}
	}
	h := NewHistory(10 * time.Second)
	for _, step := range []struct {
		now   float64
		live  []pacer.Replica
		state *pacer.State
	}{
		{0, []pacer.Replica{rep("a", 0, 0, 0), rep("b", 0, 0, 0)}, st(0, 100)},
		{2, []pacer.Replica{rep("a", 2, 40, 60), rep("b", 1.5, 0, 0)}, st(2, 100)},   // b sent nothing in 1.5 s
		{4, []pacer.Replica{rep("a", 4, 80, 120), rep("b", 3.5, 20, 80)}, st(4, 90)}, // b: 20 vip and 80 default in 2 s
		{6, []pacer.Replica{rep("a", 6, 80, 220)}, nil},                              // b left; the state unread
		{8, []pacer.Replica{rep("a", 8, 0, 10)}, st(8, 100)},                         // a's counts went back
	} {
		h.Observe(step.state, step.live)
	}
	pts := h.Points()
	if len(pts) != 5 {
		t.Fatalf("%d points, want 5", len(pts))
	}
	want := []struct{ vip, def, eff float64 }{{0, 0, 100}, {20, 30, 100}, {20 + 10, 30 + 40, 90}, {0, 50, 90}, {0, 0, 100}}
	for i, w := range want {
		p := pts[i]
		if !near(p.Lanes["vip"], w.vip) || !near(p.Lanes["default"], w.def) || !near(p.Achieved, w.vip+w.def) || p.Effective != w.eff {
			t.Errorf("point %d: vip %.2f default %.2f achieved %.2f effective %g; want %.2f %.2f %.2f %g",
				i, p.Lanes["vip"], p.Lanes["default"], p.Achieved, p.Effective, w.vip, w.def, w.vip+w.def, w.eff)
		}
	}
	if pts[3].At != at(6) || pts[3].Cap != 100 {
		t.Errorf("point without a state: at %v cap %g; want the newest report's time and the previous cap", pts[3].At, pts[3].Cap)
	}
	// Points older than keep go.
	h.Observe(st(30, 100), []pacer.Replica{rep("a", 30, 0, 10)})
	if pts := h.Points(); len(pts) != 1 {
		t.Errorf("%d points after 22s with keep 10s, want 1", len(pts))
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
