package e2e_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// admin runs a dispatcher admin command against the cluster and returns
// its stdout; it fails the test on a non-zero exit.
func (c *cluster) admin(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "dispatcher"), append([]string{"--config", filepath.Join("..", "configs", "sluice.yaml")}, args...)...)
	cmd.Env = append(cleanEnv(), c.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("dispatcher %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// The admin commands act on the running cluster: status shows lanes, rates
// and live replicas; set-rate and pause reach every replica; dlq lists and
// requeues dead letters.
func TestAdminCommands(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) { testAdminCommands(t, backend) })
	}
}

func testAdminCommands(t *testing.T, backend string) {
	c := newCluster(t, backend, 100)
	rejected := true
	c.prov.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		if a.JobID == "adm-00003" && rejected {
			rejected = false
			return mockprovider.Answer{Status: 400}
		}
		return mockprovider.Answer{Status: 200}
	})
	c.enqueue("adm", "bob", 400)
	c.start(2)
	c.waitDelivered(50, 30*time.Second)

	st := c.admin("status")
	for _, want := range []string{"default", "configured 100/s, effective 100/s", "live replicas  2"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	if out := c.admin("set-rate", "20"); !strings.Contains(out, "20/s") {
		t.Errorf("set-rate: %q", out)
	}
	if st := c.admin("status"); !strings.Contains(st, "effective 20/s") {
		t.Errorf("status after set-rate lacks the override:\n%s", st)
	}
	// Over two seconds of the override, the cluster sends about 40: never
	// more than the override allows (20/s × 2s + burst), and not far
	// under it (a replica's restart of its batching after the change may
	// cost it a few slots).
	before := len(c.prov.Arrivals())
	from := time.Now().Add(200 * time.Millisecond)
	eventually(t, 10*time.Second, "2.2s passed", func() bool { return time.Since(from) > 2*time.Second })
	in := mockprovider.Between(c.prov.Arrivals(), from, from.Add(2*time.Second))
	if got := len(in); got > 41 || got < 30 {
		var gaps []string
		for i := 1; i < len(in); i++ {
			gaps = append(gaps, in[i].At.Sub(in[i-1].At).Round(time.Millisecond).String())
		}
		t.Errorf("%d requests in 2s at the 20/s override, want 30 to 41; gaps between them: %v", got, gaps)
	}
	c.admin("set-rate", "--clear")

	c.admin("pause")
	paused := time.Now().Add(200 * time.Millisecond)
	eventually(t, 10*time.Second, "paused for 0.7s", func() bool { return time.Since(paused) > 700*time.Millisecond })
	if n := len(mockprovider.Between(c.prov.Arrivals(), paused, time.Now())); n != 0 {
		t.Errorf("%d requests while paused, want 0", n)
	}
	c.admin("resume")
	eventually(t, 10*time.Second, "deliveries after resume", func() bool {
		return len(mockprovider.Between(c.prov.Arrivals(), time.Now().Add(-200*time.Millisecond), time.Now())) > 0
	})
	if len(c.prov.Arrivals()) <= before {
		t.Error("nothing delivered during the test")
	}

	dl := c.admin("dlq", "list")
	if !strings.Contains(dl, "adm-00003") || !strings.Contains(dl, "400") {
		t.Fatalf("dlq list lacks the rejected job:\n%s", dl)
	}
	if out := c.admin("dlq", "requeue", "adm-00003"); !strings.Contains(out, "requeued 1") {
		t.Errorf("dlq requeue: %q", out)
	}
	c.waitDelivered(400, 30*time.Second) // the requeued job is delivered the second time
}
