package replica

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The warning comes once when the replicas outgrow the horizon, names the
// horizon to set, and comes again only after the count fell back under it.
func TestHorizonWatch(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w horizonWatch
	const h = 50 * time.Millisecond
	for i, s := range []struct {
		replicas int
		want     string // a substring of the one line logged; "" for none
	}{
		{4, ""},
		{64, "replicas=64 rate=500 horizon=50ms horizon_for_them=260ms"},
		{64, ""},
		{30, ""},
		{4, ""},
		{26, "replicas=26 rate=500 horizon=50ms horizon_for_them=110ms"},
	} {
		buf.Reset()
		w.see(log, 500, h, s.replicas)
		got := strings.TrimSpace(buf.String())
		switch {
		case s.want == "" && got != "":
			t.Errorf("step %d (%d replicas): logged %q, want nothing", i, s.replicas, got)
		case s.want != "" && (strings.Count(got, "\n") != 0 || !strings.Contains(got, s.want) || !strings.Contains(got, "level=WARN")):
			t.Errorf("step %d (%d replicas): logged %q, want one warning with %q", i, s.replicas, got, s.want)
		}
	}
}
