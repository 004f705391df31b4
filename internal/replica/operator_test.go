package replica

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/pacer"
)

// Each operator's change is logged once, when first seen; a start under
// no operator's setting logs nothing.
func TestOperatorWatch(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w operatorWatch
	steps := []struct {
		st   pacer.State
		want []string // substrings of the lines this step logs, in order; none: no line
	}{
		{pacer.State{ConfiguredRate: 100}, nil},
		{pacer.State{ConfiguredRate: 100}, nil},
		{pacer.State{ConfiguredRate: 100, Paused: true}, []string{"schedule paused"}},
		{pacer.State{ConfiguredRate: 100, Paused: true}, nil},
		{pacer.State{ConfiguredRate: 100, RateOverride: 250}, []string{"schedule resumed", `rate override in force" rate=250`}},
		{pacer.State{ConfiguredRate: 100, RateOverride: 250, BurstOverride: 5}, []string{`burst override in force" burst=5`}},
		{pacer.State{ConfiguredRate: 100, ConfiguredBurst: 1}, []string{`rate override cleared" rate=100`, `burst override cleared" burst=1`}},
	}
	for i, s := range steps {
		buf.Reset()
		w.see(log, s.st)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(s.want) == 0 {
			if buf.Len() != 0 {
				t.Errorf("step %d: logged %q, want nothing", i, buf.String())
			}
			continue
		}
		if len(lines) != len(s.want) {
			t.Errorf("step %d: logged %d lines %q, want %d", i, len(lines), buf.String(), len(s.want))
			continue
		}
		for j, want := range s.want {
			if !strings.Contains(lines[j], want) {
				t.Errorf("step %d line %d: %q lacks %q", i, j, lines[j], want)
			}
		}
	}
	// A replica that starts under a pause says so.
	var fresh operatorWatch
	buf.Reset()
	fresh.see(log, pacer.State{Paused: true, RateOverride: 10})
	if got := buf.String(); !strings.Contains(got, "schedule paused") || !strings.Contains(got, "first_seen=true") ||
		!strings.Contains(got, `rate override in force" rate=10`) {
		t.Errorf("first state under a pause and an override: logged %q", got)
	}
}
