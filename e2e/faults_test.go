package e2e_test

import (
	"syscall"
	"testing"
	"time"
)

// kill -9 of one replica mid-run loses nothing; duplicates are only jobs
// the killed replica had in flight (first sent just before the kill).
func TestKillNine(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			const rate, jobs = 200.0, 1200
			c := newCluster(t, backend, rate, "SLUICE_QUEUE_VISIBILITY_TIMEOUT=2s")
			ids := c.enqueue("kill", "bob", jobs)
			procs := c.start(3)
			c.waitDelivered(300, 30*time.Second)
			killedAt := time.Now()
			procs[0].signal(syscall.SIGKILL)
			if _, ok := procs[0].wait(5 * time.Second); !ok {
				t.Fatal("killed replica still running after 5s")
			}
			c.waitDelivered(jobs, 60*time.Second)

			first := map[string]time.Time{}
			count := map[string]int{}
			for _, a := range c.prov.Arrivals() {
				if a.Status/100 != 2 {
					continue
				}
				if count[a.JobID] == 0 {
					first[a.JobID] = a.At
				}
				count[a.JobID]++
			}
			dups := 0
			for _, id := range ids {
				switch n := count[id]; {
				case n == 0:
					t.Errorf("job %s lost", id)
				case n > 1:
					dups++
					// In flight at the kill: sent within a request timeout before it.
					if d := killedAt.Sub(first[id]); d < -time.Second || d > 5*time.Second {
						t.Errorf("job %s delivered %d times, first %s before the kill; only jobs in flight at the kill may repeat", id, n, d)
					}
				}
			}
			t.Logf("%s: all %d delivered; %d duplicates (in flight at the kill)", backend, jobs, dups)
		})
	}
}

// SIGTERM mid-run: the replica exits 0 within its shutdown deadline, and
// nothing is lost or sent twice.
func TestSIGTERM(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			const rate, jobs = 200.0, 1200
			c := newCluster(t, backend, rate, "SLUICE_QUEUE_VISIBILITY_TIMEOUT=3s", "SLUICE_DISPATCH_SHUTDOWN_TIMEOUT=5s")
			ids := c.enqueue("term", "bob", jobs)
			procs := c.start(3)
			c.waitDelivered(300, 30*time.Second)
			procs[0].signal(syscall.SIGTERM)
			code, ok := procs[0].wait(5*time.Second + 2*time.Second)
			if !ok {
				t.Fatal("replica did not exit within its 5s shutdown deadline (+2s)")
			}
			if code != 0 {
				t.Errorf("replica exited %d after SIGTERM, want 0", code)
			}
			c.waitDelivered(jobs, 60*time.Second)
			count := map[string]int{}
			for _, a := range c.prov.Arrivals() {
				count[a.JobID]++
			}
			for _, id := range ids {
				if count[id] != 1 {
					t.Errorf("job %s reached the provider %d times, want exactly once", id, count[id])
				}
			}
		})
	}
}
