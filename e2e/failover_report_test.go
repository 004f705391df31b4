package e2e_test

// What a failover run logs to explain itself: the replication state at the
// kill, the Sentinel group's log around the failover, when and by which
// replica duplicates were sent, and the dispatchers' warnings. Used by
// TestTopologySentinel (runSentinelFailover); none of it is asserted but
// the count of failovers (switches).

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/internal/testredis"
)

// replSampler samples the master's and the replica's replication offsets
// every 50ms until stopped, so that the replica's distance behind the
// master can be told in time.
type replSampler struct {
	master, replica *redis.Client
	quit, done      chan struct{}

	mu        sync.Mutex
	hist      []offsetAt    // the master's offset, in time order
	maxBehind time.Duration // the most the replica was behind
	maxAt     time.Time     // when
	linkDown  []time.Time   // samples where the replica's link was not up
	syncs     string        // the master's sync counts at the last sample
}

type offsetAt struct {
	at     time.Time
	offset int64
}

func startReplSampler(t *testing.T, g *testredis.SentinelGroup) *replSampler {
	s := &replSampler{master: g.Master.Client(), replica: g.Replica.Client(), quit: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	t.Cleanup(s.stop)
	return s
}

func (s *replSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

func (s *replSampler) run() {
	defer close(s.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err1 := s.master.Info(ctx, "replication", "stats").Result()
		r, err2 := s.replica.Info(ctx, "replication").Result()
		cancel()
		if err1 != nil || err2 != nil {
			continue
		}
		now := time.Now()
		mf, rf := infoFields(m), infoFields(r)
		mo, _ := strconv.ParseInt(mf["master_repl_offset"], 10, 64)
		ro, _ := strconv.ParseInt(rf["slave_repl_offset"], 10, 64)
		s.mu.Lock()
		s.hist = append(s.hist, offsetAt{now, mo})
		if b := s.behind(ro, now); b > s.maxBehind {
			s.maxBehind, s.maxAt = b, now
		}
		if rf["master_link_status"] != "up" {
			s.linkDown = append(s.linkDown, now)
		}
		s.syncs = syncCounts(mf)
		s.mu.Unlock()
	}
}

// behind is how long before now the master first had more than offset:
// at least that long the replica is behind. Call with s.mu held.
func (s *replSampler) behind(offset int64, now time.Time) time.Duration {
	i, _ := slices.BinarySearchFunc(s.hist, offset+1, func(o offsetAt, v int64) int {
		switch {
		case o.offset < v:
			return -1
		case o.offset > v:
			return 1
		}
		return 0
	})
	if i == len(s.hist) {
		return 0
	}
	return now.Sub(s.hist[i].at)
}

// summary tells the worst lag over the samples and the links down.
func (s *replSampler) summary(killed time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := fmt.Sprintf("%d samples; the replica at most %s behind the master (%s before the kill); its link down in %d samples",
		len(s.hist), s.maxBehind.Round(time.Millisecond), killed.Sub(s.maxAt).Round(time.Millisecond), len(s.linkDown))
	if len(s.linkDown) > 0 {
		text += fmt.Sprintf(" (first %s, last %s before the kill)",
			killed.Sub(s.linkDown[0]).Round(time.Millisecond), killed.Sub(s.linkDown[len(s.linkDown)-1]).Round(time.Millisecond))
	}
	return text + "; master " + s.syncs
}

// replicationState reads, just before the kill, the master's and the
// replica's offsets and the master's sync counts.
func replicationState(ctx context.Context, s *replSampler) string {
	ictx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := s.master.Info(ictx, "replication", "stats").Result()
	if err != nil {
		return "master INFO: " + err.Error()
	}
	r, err := s.replica.Info(ictx, "replication").Result()
	if err != nil {
		return "replica INFO: " + err.Error()
	}
	now := time.Now()
	mf, rf := infoFields(m), infoFields(r)
	mo, _ := strconv.ParseInt(mf["master_repl_offset"], 10, 64)
	ro, _ := strconv.ParseInt(rf["slave_repl_offset"], 10, 64)
	s.mu.Lock()
	behind := s.behind(ro, now)
	s.mu.Unlock()
	return fmt.Sprintf("master_repl_offset %d, replica's slave_repl_offset %d: %d bytes (at least %s) behind; replica link %s, last io %ss ago; the master sees %s; master %s",
		mo, ro, mo-ro, behind.Round(time.Millisecond), rf["master_link_status"], rf["master_last_io_seconds_ago"], mf["slave0"], syncCounts(mf))
}

func syncCounts(f map[string]string) string {
	return fmt.Sprintf("sync_full %s, sync_partial_ok %s, sync_partial_err %s", f["sync_full"], f["sync_partial_ok"], f["sync_partial_err"])
}

// infoFields parses an INFO reply into its fields.
func infoFields(info string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// linkText tells what each connection through the link carried and what
// the cut dropped.
func linkText(stats []pipeStats, killed time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the lag link had %d connection(s)", len(stats))
	for i, st := range stats {
		fmt.Fprintf(&b, "; #%d accepted %s before the kill: %d bytes read, %d delivered, dropped %d",
			i, killed.Sub(st.Accepted).Round(time.Millisecond), st.In, st.Out, st.In-st.Out)
		if !st.Oldest.IsZero() {
			fmt.Fprintf(&b, " read over the last %s", killed.Sub(st.Oldest).Round(time.Millisecond))
		}
		fmt.Fprintf(&b, ", delivered at most %s late", st.MaxLate.Round(time.Millisecond))
	}
	return b.String()
}

// replicationLine picks the servers' replication lines and the sentinels'
// failover events out of the group's log.
var replicationLine = regexp.MustCompile(`(?i)sync|lost|master|timeout|tilt|sdown|odown|failover|switch|promot|convert|reboot|role|elected`)

// groupLogText is the group's log from start: replication lines up to
// 2s before the kill, every line after.
func groupLogText(g *testredis.SentinelGroup, start, killed time.Time) string {
	var b strings.Builder
	n := 0
	for _, l := range g.Logs(start) {
		if l.At.Before(killed.Add(-2*time.Second)) && !replicationLine.MatchString(l.Text) {
			continue
		}
		if n++; n > 150 {
			b.WriteString("  ...\n")
			break
		}
		fmt.Fprintf(&b, "  %+8.3fs %-10s %s\n", l.At.Sub(killed).Seconds(), l.Who, l.Text)
	}
	return b.String()
}

// duplicatesText tells, of the jobs delivered more than once, when they
// were first sent and sent again (by 100ms, relative to the kill), by
// which replica, with which attempt numbers, and which jobs they were.
func duplicatesText(arr []mockprovider.Arrival, killed time.Time) string {
	byJob := map[string][]mockprovider.Arrival{}
	for _, a := range arr {
		if a.Delivered() {
			byJob[a.JobID] = append(byJob[a.JobID], a)
		}
	}
	firsts := map[int]int{}   // 100ms bucket from the kill -> jobs first sent then
	agains := map[int]int{}   // 100ms bucket -> repeat deliveries then
	pairs := map[string]int{} // "first sender>repeat sender" -> repeats
	attempts := map[string]int{}
	kinds := map[string]int{}
	var sameSender, n int
	var dupIDs []string
	lastBefore := map[string]int{} // kind -> highest index sent before the kill
	for id, as := range byJob {
		kind, num, _ := strings.Cut(id, "-")
		if i, err := strconv.Atoi(num); err == nil && as[0].At.Before(killed) {
			lastBefore[kind] = max(lastBefore[kind], i)
		}
		if len(as) < 2 {
			continue
		}
		slices.SortFunc(as, func(a, b mockprovider.Arrival) int { return a.At.Compare(b.At) })
		firsts[bucket(as[0].At, killed)]++
		dupIDs = append(dupIDs, id)
		for _, a := range as[1:] {
			n++
			agains[bucket(a.At, killed)]++
			pairs[senderOf(as[0])+">"+senderOf(a)]++
			if senderOf(as[0]) == senderOf(a) {
				sameSender++
			}
			attempts[fmt.Sprintf("%d>%d", as[0].Attempt, a.Attempt)]++
			kinds[kind]++
		}
	}
	if n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d repeat deliveries (%d by the replica that sent the job first); jobs first sent, by 100ms from the kill: %s; sent again: %s; first>repeat sender: %v; first>repeat attempt: %v; by kind: %v; the jobs: %s (highest index first sent before the kill: %v)",
		n, sameSender, bucketsText(firsts), bucketsText(agains), pairs, attempts, kinds, rangesText(dupIDs), lastBefore)
}

// rangesText writes ids ("kind-00012") as runs of consecutive indexes
// by kind: "backlog 12-40 43".
func rangesText(ids []string) string {
	byKind := map[string][]int{}
	for _, id := range ids {
		kind, num, _ := strings.Cut(id, "-")
		if i, err := strconv.Atoi(num); err == nil {
			byKind[kind] = append(byKind[kind], i)
		}
	}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		idx := byKind[kind]
		slices.Sort(idx)
		part := kind
		for i := 0; i < len(idx); {
			j := i
			for j+1 < len(idx) && idx[j+1] <= idx[j]+1 {
				j++
			}
			if j == i {
				part += fmt.Sprintf(" %d", idx[i])
			} else {
				part += fmt.Sprintf(" %d-%d", idx[i], idx[j])
			}
			i = j + 1
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// bucket is the 100ms interval of at relative to killed (0: the first
// 100ms after the kill, -1 the last before it).
func bucket(at, killed time.Time) int {
	d := at.Sub(killed)
	b := int(d / (100 * time.Millisecond))
	if d < 0 {
		b--
	}
	return b
}

func bucketsText(m map[int]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%+.1fs:%d", float64(k)/10, m[k])
	}
	return strings.Join(parts, " ")
}

// warningsText returns the WARN and ERROR lines of a dispatcher's log
// stamped at or after since: how many of each message, and the first
// line of each (at most max messages).
func warningsText(path string, since time.Time, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  " + err.Error()
	}
	var order []string
	first, count := map[string]string{}, map[string]int{}
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			continue
		}
		if ts, ok := strings.CutPrefix(line, "time="); ok {
			f, _, _ := strings.Cut(ts, " ")
			if at, err := time.Parse(time.RFC3339Nano, f); err == nil && at.Before(since) {
				continue
			}
		}
		msg := line
		if _, m, ok := strings.Cut(line, "msg="); ok {
			msg, _, _ = strings.Cut(m, "\" ")
		}
		if count[msg]++; count[msg] == 1 {
			order = append(order, msg)
			first[msg] = strings.TrimRight(line, "\n")
		}
	}
	var out []string
	for i, msg := range order {
		if i == max {
			out = append(out, fmt.Sprintf("  ... %d more messages", len(order)-max))
			break
		}
		out = append(out, fmt.Sprintf("  %d× %s", count[msg], first[msg]))
	}
	return strings.Join(out, "\n")
}

// switches counts the distinct +switch-master events in lines: each
// sentinel logs each failover once.
func switches(lines []testredis.LogLine) int {
	seen := map[string]bool{}
	for _, l := range lines {
		if _, ev, ok := strings.Cut(l.Text, "+switch-master "); ok {
			seen[ev] = true
		}
	}
	return len(seen)
}
