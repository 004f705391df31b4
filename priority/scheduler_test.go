package priority

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func newScheduler(t *testing.T, p Policy, weights ...int) *Scheduler {
	t.Helper()
	lanes := make([]Lane, len(weights))
	for i, w := range weights {
		lanes[i] = Lane{Name: fmt.Sprintf("l%d", i), Weight: w}
	}
	s, err := NewScheduler(Config{Lanes: lanes, Policy: p})
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	return s
}

func allReady(n int) []bool {
	r := make([]bool, n)
	for i := range r {
		r[i] = true
	}
	return r
}

// ready parses "x.x" into {true, false, true}.
func ready(s string) []bool {
	r := make([]bool, len(s))
	for i, c := range s {
		r[i] = c == 'x'
	}
	return r
}

func TestNewSchedulerInvalid(t *testing.T) {
	_, err := NewScheduler(Config{Lanes: []Lane{{Name: "vip", Weight: -1}}, Policy: "random"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"queue.lanes[0].weight", "queue.policy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to name %q", err, want)
		}
	}
}

func TestNewSchedulerDefaultsCopy(t *testing.T) {
	cfg := Config{Lanes: []Lane{{Name: "vip"}, {Name: "default"}}}
	s, err := NewScheduler(cfg)
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	if cfg.Lanes[0].Weight != 0 || cfg.Policy != "" {
		t.Errorf("NewScheduler changed its argument: got %+v", cfg)
	}
	if got, _ := s.Next(ready(".x")); got != 1 {
		t.Errorf("got lane %d, want 1", got)
	}
	if got, _ := s.Next(ready("xx")); got != 0 {
		t.Errorf("default policy is strict: got lane %d, want 0", got)
	}
	if got := s.Len(); got != 2 {
		t.Errorf("Len: got %d, want 2", got)
	}
}

func TestStrictNext(t *testing.T) {
	tests := []struct {
		ready  string
		want   int
		wantOK bool
	}{
		{"xxx", 0, true},
		{".xx", 1, true},
		{"..x", 2, true},
		{"x.x", 0, true},
		{"...", 0, false},
		{"", 0, false},
		{".x", 1, true},     // shorter than the lanes: the rest are not ready
		{"...xx", 0, false}, // entries past the last lane are ignored
		{"..x.x", 2, true},
	}
	s := newScheduler(t, Strict, 8, 2, 1)
	for _, tt := range tests {
		got, ok := s.Next(ready(tt.ready))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Next(%q): got (%d, %v), want (%d, %v)", tt.ready, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestStrictNeverSkipsAHigherLane feeds random readiness and checks that no
// choice ever goes to a lane below a ready one.
func TestStrictNeverSkipsAHigherLane(t *testing.T) {
	s := newScheduler(t, Strict, 1, 5, 2, 9)
	r := rand.New(rand.NewPCG(7, 11))
	rd := make([]bool, 4)
	for n := range 10000 {
		some := false
		for i := range rd {
			rd[i] = r.IntN(2) == 0
			some = some || rd[i]
		}
		got, ok := s.Next(rd)
		if ok != some {
			t.Fatalf("pick %d, ready %v: got ok %v, want %v", n, rd, ok, some)
		}
		if !ok {
			continue
		}
		if !rd[got] {
			t.Fatalf("pick %d, ready %v: got lane %d, which is not ready", n, rd, got)
		}
		for i := range got {
			if rd[i] {
				t.Fatalf("pick %d, ready %v: got lane %d, want %d (higher and ready)", n, rd, got, i)
			}
		}
	}
}

func TestWeightedSequence(t *testing.T) {
	tests := []struct {
		weights []int
		want    string // lanes chosen, as letters, all lanes ready
	}{
		{[]int{5, 1, 1}, "aabacaa" + "aabacaa"}, // nginx's documented example
		{[]int{8, 2}, "aabaaaabaa"},
		{[]int{1, 1, 1}, "abcabc"},
		{[]int{2, 3}, "babab"},
		{[]int{1}, "aaa"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.weights), func(t *testing.T) {
			s := newScheduler(t, Weighted, tt.weights...)
			var b strings.Builder
			for range len(tt.want) {
				l, ok := s.Next(allReady(len(tt.weights)))
				if !ok {
					t.Fatalf("got ok false, want true")
				}
				b.WriteByte(byte('a' + l))
			}
			if got := b.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWeightedShares makes 1000 choices with every lane ready and checks
// that every full round of W choices (W the sum of the weights) gives each
// lane exactly its weight, and that after any number n of choices each
// lane's count is within one of its exact share n*w/W.
func TestWeightedShares(t *testing.T) {
	for _, weights := range [][]int{{8, 2}, {5, 1, 1}, {3, 7, 11, 2}, {1, 1000}, {1000, 1}, {1, 1, 1, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			s := newScheduler(t, Weighted, weights...)
			total := 0
			for _, w := range weights {
				total += w
			}
			count := make([]int, len(weights))
			round := make([]int, len(weights))
			for n := 1; n <= 1000; n++ {
				l, ok := s.Next(allReady(len(weights)))
				if !ok {
					t.Fatalf("choice %d: got ok false, want true", n)
				}
				count[l]++
				round[l]++
				for i, w := range weights {
					exact := float64(n*w) / float64(total)
					if d := float64(count[i]) - exact; d > 1 || d < -1 {
						t.Fatalf("after %d choices lane %d (weight %d): got %d, want %.2f ± 1", n, i, w, count[i], exact)
					}
				}
				if n%total == 0 {
					for i, w := range weights {
						if round[i] != w {
							t.Fatalf("round ending at choice %d, lane %d: got %d choices, want %d", n, i, round[i], w)
						}
					}
					clear(round)
				}
			}
		})
	}
}

// TestWeightedBackloggedOnly checks that lanes without a job ready are never
// chosen, and that the ready ones share the slots by their weights alone.
func TestWeightedBackloggedOnly(t *testing.T) {
	s := newScheduler(t, Weighted, 8, 5, 2)
	count := make([]int, 3)
	for range 1000 {
		l, ok := s.Next(ready("x.x"))
		if !ok {
			t.Fatal("got ok false, want true")
		}
		count[l]++
	}
	if count[1] != 0 {
		t.Errorf("lane 1, never ready: got %d choices, want 0", count[1])
	}
	// 1000 choices between weights 8 and 2: 800 and 200.
	if count[0] != 800 || count[2] != 200 {
		t.Errorf("got %v, want [800 0 200]", count)
	}
	if _, ok := s.Next(ready("...")); ok {
		t.Error("nothing ready: got ok true, want false")
	}
}

// TestWeightedIdleLaneGetsNoBurst checks that a lane that had nothing to
// send does not make up for it afterwards: its share restarts at once.
func TestWeightedIdleLaneGetsNoBurst(t *testing.T) {
	s := newScheduler(t, Weighted, 1, 1)
	for range 500 {
		if l, _ := s.Next(ready(".x")); l != 1 {
			t.Fatalf("only lane 1 ready: got lane %d, want 1", l)
		}
	}
	var b strings.Builder
	for range 6 {
		l, _ := s.Next(ready("xx"))
		b.WriteByte(byte('a' + l))
	}
	if got := b.String(); got != "ababab" {
		t.Errorf("after lane 0 was idle: got %q, want %q", got, "ababab")
	}
}

// TestWeightedNoneReadyChangesNothing checks that a call with no lane ready
// leaves the choices that follow as they would have been.
func TestWeightedNoneReadyChangesNothing(t *testing.T) {
	a := newScheduler(t, Weighted, 3, 2)
	b := newScheduler(t, Weighted, 3, 2)
	for n := range 50 {
		if _, ok := b.Next(ready("..")); ok {
			t.Fatal("got ok true, want false")
		}
		la, _ := a.Next(ready("xx"))
		lb, _ := b.Next(ready("xx"))
		if la != lb {
			t.Fatalf("choice %d: got %d, want %d", n, lb, la)
		}
	}
}

func TestWeightedReset(t *testing.T) {
	s := newScheduler(t, Weighted, 2, 1)
	first, _ := s.Next(allReady(2))
	s.Next(allReady(2))
	s.Reset()
	if got, _ := s.Next(allReady(2)); got != first {
		t.Errorf("after Reset: got %d, want %d", got, first)
	}
}

// TestWeightedNoStarvation feeds random readiness and checks that a lane
// that stays ready is chosen within two rounds of the weights, whatever the
// other lanes do.
func TestWeightedNoStarvation(t *testing.T) {
	for _, weights := range [][]int{{1, 1000}, {1000, 1}, {3, 7, 11, 2}, {1, 1, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			s := newScheduler(t, Weighted, weights...)
			total := 0
			for _, w := range weights {
				total += w
			}
			r := rand.New(rand.NewPCG(3, 5))
			rd := make([]bool, len(weights))
			waited := make([]int, len(weights))
			for n := range 100000 {
				for i := range rd {
					rd[i] = r.IntN(4) > 0
				}
				l, ok := s.Next(rd)
				for i := range rd {
					switch {
					case ok && l == i:
						waited[i] = 0
					case rd[i]:
						waited[i]++
					}
					if waited[i] > 2*total {
						t.Fatalf("choice %d: lane %d ready for %d choices without one, want <= %d", n, i, waited[i], 2*total)
					}
				}
			}
		})
	}
}

// TestWeightedBoundedExhaustive explores every readiness pattern from every
// reachable state for small weights: the states are finite (credit stays
// bounded) and a lane that stays ready never waits more than 2W choices.
func TestWeightedBoundedExhaustive(t *testing.T) {
	for _, weights := range [][]int{{1, 2, 3}, {3, 2, 1}, {1, 5}, {2, 1, 1, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			total := 0
			for _, w := range weights {
				total += w
			}
			states := reachable(t, weights)
			for lane := range weights {
				if got := longestWait(weights, states, lane); got > 2*total {
					t.Errorf("lane %d: got a wait of %d choices, want <= %d", lane, got, 2*total)
				}
			}
		})
	}
}

// step runs one weighted choice from credit with the lanes in mask ready.
func step(weights, credit []int, mask int) (next []int, chosen int) {
	s := &Scheduler{policy: Weighted, weights: weights, credit: append([]int(nil), credit...)}
	rd := make([]bool, len(weights))
	for i := range rd {
		rd[i] = mask&(1<<i) != 0
	}
	l, ok := s.Next(rd)
	if !ok {
		l = -1
	}
	return s.credit, l
}

func reachable(t *testing.T, weights []int) map[string][]int {
	t.Helper()
	start := make([]int, len(weights))
	seen := map[string][]int{fmt.Sprint(start): start}
	todo := [][]int{start}
	for len(todo) > 0 {
		c := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for m := 1; m < 1<<len(weights); m++ {
			nc, _ := step(weights, c, m)
			if k := fmt.Sprint(nc); seen[k] == nil {
				seen[k] = nc
				todo = append(todo, nc)
			}
			if len(seen) > 100000 {
				t.Fatalf("more than 100000 states: credit is not bounded")
			}
		}
	}
	return seen
}

// longestWait is the longest run of choices, from any reachable state, in
// which lane is ready and not chosen (the other lanes' readiness being
// adversarial). It fails by returning a huge number if the run is unbounded.
func longestWait(weights []int, states map[string][]int, lane int) int {
	wait := map[string]int{}
	for range len(states) + 1 {
		changed := false
		for k, c := range states {
			longest := 0
			for m := 1; m < 1<<len(weights); m++ {
				if m&(1<<lane) == 0 {
					continue
				}
				nc, l := step(weights, c, m)
				if l != lane {
					longest = max(longest, 1+wait[fmt.Sprint(nc)])
				}
			}
			if longest != wait[k] {
				wait[k], changed = longest, true
			}
		}
		if !changed {
			m := 0
			for _, v := range wait {
				m = max(m, v)
			}
			return m
		}
	}
	return 1 << 30 // still growing after as many rounds as states: a cycle that never chooses lane
}
