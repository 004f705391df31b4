package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/console"
)

// printStatus prints a snapshot as text: what could be read, and for each
// part that could not, why. lanesUnknown says that queue.lanes was not
// configured here, so the lanes shown may not be the dispatchers'.
func printStatus(g *globals, cfg *config.Config, s console.Snapshot, lanesUnknown bool) error {
	w := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "queue %s (%s)\n\n", s.Queue, s.Backend)
	if s.QueueError != "" {
		fmt.Fprintf(w, "lanes\tUNREACHABLE: %s\n", oneLine(s.QueueError))
	} else {
		fmt.Fprintln(w, "LANE\tREADY\tDELAYED\tIN FLIGHT\tOLDEST\tCONSUMERS")
		for _, l := range s.Lanes {
			consumers := "-" // none per replica (JetStream), or unreadable
			if l.Consumers != nil {
				consumers = strconv.FormatInt(*l.Consumers, 10)
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\n", l.Name, l.Ready, l.Delayed, l.InFlight, seconds(l.OldestSeconds), consumers)
		}
		fmt.Fprintln(w, "(in flight: fetched by a replica and not yet settled: held for a slot, or being sent)")
		if lanesUnknown {
			fmt.Fprintf(w, "(queue.lanes is not configured here, no --config and no %s: these are the default lanes, not\n"+
				" necessarily the dispatchers'; give their configuration to see theirs)\n", envLanes)
		}
		fmt.Fprintf(w, "\ndead letters\t%d\n", s.DeadLetters)
	}
	if p := s.Pacer; p == nil {
		fmt.Fprintf(w, "pacer\tUNREACHABLE: %s\n", oneLine(s.PacerError))
	} else {
		switch {
		case p.ConfiguredRate == 0 && p.RateOverride == 0:
			fmt.Fprintln(w, "rate\tnot known yet: no replica has drawn on the schedule, and no pacer.rate is configured here")
		case p.ConfiguredRate == 0:
			fmt.Fprintf(w, "rate\tconfigured: not known yet, effective %s/s%s\n", tenths(p.EffectiveRate), overrideNote(p.RateOverride))
		default:
			fmt.Fprintf(w, "rate\tconfigured %g/s, effective %s/s%s\n", p.ConfiguredRate, tenths(p.EffectiveRate), overrideNote(p.RateOverride))
		}
		fmt.Fprintf(w, "adaptive\t%s\n", adaptiveNote(cfg.Pacer.Adaptive.Enabled, s.At, p))
		fmt.Fprintf(w, "burst\tconfigured %d, effective %d\n", p.ConfiguredBurst, p.EffectiveBurst)
		if len(p.TenantOverrides) > 0 {
			fmt.Fprintf(w, "tenant overrides\t%s (dispatcher set-rate --tenant NAME --clear)\n", tenantList(p.TenantOverrides))
		}
		switch {
		case p.Paused:
			fmt.Fprintln(w, "schedule\tPAUSED (dispatcher resume)")
		case p.ThrottledUntil != nil:
			fmt.Fprintf(w, "schedule\tthrottled by the provider for %s more\n", p.ThrottledUntil.Sub(s.At).Round(time.Millisecond))
		default:
			fmt.Fprintf(w, "schedule\trunning, %s ahead of now\n", seconds(p.BacklogSeconds))
		}
	}
	if s.ReplicasError != "" {
		fmt.Fprintf(w, "\nlive replicas\tUNREADABLE: %s\n", oneLine(s.ReplicasError))
		return w.Flush()
	}
	fmt.Fprintf(w, "\nlive replicas\t%d\n", len(s.Replicas))
	for _, r := range s.Replicas {
		console := "-"
		if r.Admin != "" {
			console = "http://" + r.Admin + "/console/"
		}
		fmt.Fprintf(w, "  %s\tsending %d, held %d, sent %s\tconsole %s\tseen %s ago\n", r.ID, r.Sending, r.Held,
			sentNote(r.Sent), console, seconds(r.SeenSecondsAgo))
	}
	return w.Flush()
}

// sentNote prints a replica's sent counts, lane by lane.
func sentNote(sent map[string]int64) string {
	if len(sent) == 0 {
		return "0"
	}
	var parts []string
	for _, l := range slices.Sorted(maps.Keys(sent)) {
		parts = append(parts, l+" "+strconv.FormatInt(sent[l], 10))
	}
	return strings.Join(parts, ", ")
}

// seconds prints a number of seconds as a duration to the millisecond.
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// adaptiveNote says what the provider's answers did to the rate.
func adaptiveNote(on bool, now time.Time, p *console.Pacer) string {
	a := p.Adaptation
	if !on {
		return "off (pacer.adaptive.enabled: false): each throttling answer holds the cluster for its Retry-After"
	}
	if a.Cuts == 0 && a.Holds == 0 {
		return "on; the provider has not throttled"
	}
	var b strings.Builder
	if a.Episode {
		ceiling := p.ConfiguredRate
		if p.RateOverride > 0 {
			ceiling = p.RateOverride
		}
		fmt.Fprintf(&b, "the provider is throttling: rate %s/s of %g/s", tenths(a.Rate), ceiling)
	} else {
		b.WriteString("at the ceiling")
	}
	fmt.Fprintf(&b, "; %d cuts, %d holds so far", a.Cuts, a.Holds)
	if !a.LastCut.IsZero() {
		fmt.Fprintf(&b, ", last cut %s ago", now.Sub(a.LastCut).Round(time.Second))
	}
	if !a.HeldUntil.IsZero() && !a.HeldUntil.After(now) {
		fmt.Fprintf(&b, ", last hold ended %s ago", now.Sub(a.HeldUntil).Round(time.Second))
	}
	if a.Tolerated >= 0.01 { // under 1%: the trace of clean windows, not a learnt share
		fmt.Fprintf(&b, "; %.1f%% of answers throttled whatever the rate, tolerated", a.Tolerated*100)
	}
	return b.String()
}

// tenths prints a rate to a tenth.
func tenths(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

func overrideNote(o float64) string {
	if o > 0 {
		return " (override set with dispatcher set-rate; --clear removes it)"
	}
	return ""
}

// oneLine keeps a text on one line of at most 120 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// tenantList renders tenant rates as "acme 5/s, big-corp 7/s", by name.
func tenantList(rates map[string]float64) string {
	names := slices.Sorted(maps.Keys(rates))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %g/s", n, rates[n])
	}
	return strings.Join(parts, ", ")
}
