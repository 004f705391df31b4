package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/setting"
	"github.com/sluicehq/sluice/sink"
)

// Every exported field of a package's Config is either a key of its
// section (tagged) or marked as none (yaml:"-"): a field added to
// pacer.Config with a yaml tag is a key of the file, of the environment and
// of the flags without a change here, and one added without a tag fails
// this test instead of being silently ignored.
func TestEveryPackageFieldIsAKeyOrMarkedNone(t *testing.T) {
	s := newSchema()
	for _, tt := range []struct {
		prefix string
		typ    reflect.Type
	}{
		{"pacer.", reflect.TypeFor[pacer.Config]()},
		{"queue.", reflect.TypeFor[queue.Config]()},
		{"queue.", reflect.TypeFor[priority.Config]()},
		{"sink.", reflect.TypeFor[sink.HTTPConfig]()},
		{"dispatch.", reflect.TypeFor[dispatch.Config]()},
	} {
		checkFieldKeys(t, s, tt.prefix, tt.typ)
	}
	for _, notKey := range []string{"pacer.clock", "pacer.log", "dispatch.now", "dispatch.rand", "dispatch.max_in_flight", "queue.now", "queue.consumer", "sink.now"} {
		if s.byKey[notKey] != nil {
			t.Errorf("%s: got a key, want none", notKey)
		}
	}
}

// checkFieldKeys checks that every exported field of typ is a key under prefix
// or marked as none; a squashed struct's fields are its parent's.
func checkFieldKeys(t *testing.T, s *schema, prefix string, typ reflect.Type) {
	t.Helper()
	for i := range typ.NumField() {
		sf := typ.Field(i)
		tag, tagged := sf.Tag.Lookup("yaml")
		switch {
		case !sf.IsExported() || tag == "-":
		case !tagged:
			t.Errorf("%s.%s has no yaml tag: give it its key, or yaml:\"-\" when it is none", typ, sf.Name)
		case squashed(sf):
			checkFieldKeys(t, s, prefix, sf.Type)
		default:
			name, _ := yamlName(sf)
			if key := prefix + name; s.byKey[key] == nil && s.sections[key] == nil {
				t.Errorf("%s.%s: got no key %s", typ, sf.Name, key)
			}
		}
	}
}

// The pacer's keys are its Config's, decoded whatever their type.
func TestPacerKeys(t *testing.T) {
	c := mustLoad(t, "", []string{"SLUICE_PACER_MAX_LATENESS=5ms", "SLUICE_PACER_HEADROOM=-1"}, required())
	if got := c.PacerConfig(); got.MaxLateness != 5*time.Millisecond || got.Headroom != -1 {
		t.Errorf("max_lateness, headroom: got %s, %v, want 5ms, -1", got.MaxLateness, got.Headroom)
	}
	c = mustLoad(t, "", nil, withRequired(map[string]string{"pacer.max_lateness": "10ms"}))
	if got, want := c.Pacer.Headroom, 0.1; got != want {
		t.Errorf("headroom from max_lateness 10ms: got %v, want %v (the pacer's default)", got, want)
	}
	_, err := Load("", nil, withRequired(map[string]string{"pacer.headroom": "0.5", "pacer.max_lateness": "soon"}))
	if keys := problemKeys(t, err); !slices.Equal(keys, []string{"pacer.max_lateness", "pacer.headroom"}) {
		t.Errorf("got problems about %v, want pacer.max_lateness, pacer.headroom; error:\n%v", keys, err)
	}
}

// pacer.when_unavailable, pacer.degraded_safety and pacer.max_degraded:
// defaults, the environment, and a problem per bad value naming its key.
func TestPacerDegradedKeys(t *testing.T) {
	c := mustLoad(t, "", nil, required())
	if got := c.PacerConfig(); got.WhenUnavailable != pacer.Stop || got.DegradedSafety != pacer.DefaultDegradedSafety ||
		got.MaxDegraded != pacer.DefaultMaxDegraded {
		t.Errorf("defaults: got %q, %v, %s; want stop, %v, %s", got.WhenUnavailable, got.DegradedSafety, got.MaxDegraded,
			pacer.DefaultDegradedSafety, pacer.DefaultMaxDegraded)
	}
	c = mustLoad(t, "", []string{"SLUICE_PACER_WHEN_UNAVAILABLE=local", "SLUICE_PACER_DEGRADED_SAFETY=0.5",
		"SLUICE_PACER_MAX_DEGRADED=8s"}, required())
	if got := c.PacerConfig(); got.WhenUnavailable != pacer.Local || got.DegradedSafety != 0.5 || got.MaxDegraded != 8*time.Second {
		t.Errorf("from the environment: got %q, %v, %s; want local, 0.5, 8s", got.WhenUnavailable, got.DegradedSafety, got.MaxDegraded)
	}
	_, err := Load("", nil, withRequired(map[string]string{
		"pacer.when_unavailable": "guess", "pacer.degraded_safety": "1.5", "pacer.max_degraded": "-1s"}))
	want := map[string]string{
		"pacer.when_unavailable": `must be stop or local, got "guess"`,
		"pacer.degraded_safety":  "must be more than 0 and at most 1, got 1.5",
		"pacer.max_degraded":     "must be more than 0 and at most 1h, got -1s",
	}
	got := setting.Errors(err)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), err)
	}
	for _, p := range got {
		if p.Problem != want[p.Key] || !errors.Is(err, pacer.ErrInvalidConfig) {
			t.Errorf("%s: got %q, want %q wrapping pacer.ErrInvalidConfig", p.Key, p.Problem, want[p.Key])
		}
	}
}

// Each problem is a *setting.Error that errors.As finds, wrapping the
// sentinel of the package that found it.
func TestProblemsAreFieldErrors(t *testing.T) {
	_, err := Load("", nil, withRequired(map[string]string{
		"pacer.burst": "-1", "queue.policy": "random", "queue.max_attempts": "-2",
		"sink.timeout": "-1s", "dispatch.shutdown_timeout": "-1s", "metrics.listen": "nowhere",
	}))
	var fe *setting.Error
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As(*setting.Error): got false for %v", err)
	}
	want := map[string]error{
		"pacer.burst":               pacer.ErrInvalidConfig,
		"queue.policy":              priority.ErrInvalidConfig,
		"queue.max_attempts":        queue.ErrInvalidConfig,
		"sink.timeout":              sink.ErrInvalidConfig,
		"dispatch.shutdown_timeout": dispatch.ErrInvalidConfig,
		"metrics.listen":            nil, // this package's own check
	}
	got := setting.Errors(err)
	if keys := problemKeys(t, err); len(got) != len(keys) {
		t.Fatalf("got %d field errors for %d lines:\n%v", len(got), len(keys), err)
	}
	for _, p := range got {
		sentinel, ok := want[p.Key]
		if !ok {
			t.Errorf("got a problem about %s, want none", p.Key)
			continue
		}
		if p.Err != sentinel || (sentinel != nil && !errors.Is(err, sentinel)) {
			t.Errorf("%s: wraps %v, want %v", p.Key, p.Err, sentinel)
		}
		if strings.Contains(p.Problem, "invalid config") {
			t.Errorf("%s: problem %q repeats the sentinel", p.Key, p.Problem)
		}
		delete(want, p.Key)
	}
	for key := range want {
		t.Errorf("got no problem about %s", key)
	}
}

// The engine keeps to sink.max_in_flight, queue.backoff, pacer.rate and
// queue.visibility_timeout, and has its own dispatch.shutdown_timeout.
func TestDispatchConfig(t *testing.T) {
	c := mustLoad(t, "", []string{"SLUICE_SINK_MAX_IN_FLIGHT=9", "SLUICE_QUEUE_BACKOFF_MAX=1m"}, withRequired(map[string]string{
		"queue.visibility_timeout": "40s", "dispatch.shutdown_timeout": "3s", "queue.backoff.min": "2s",
	}))
	d := c.DispatchConfig()
	got := []any{d.MaxInFlight, d.BackoffMin, d.BackoffMax, d.RateHint, d.VisibilityTimeout, d.ShutdownTimeout}
	want := []any{9, 2 * time.Second, time.Minute, 10.0, 40 * time.Second, 3 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DispatchConfig(): got %v, want %v", got, want)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("DispatchConfig().Validate(): %v", err)
	}
	c = mustLoad(t, "", nil, required())
	if lo, hi := c.Backoff(); lo != time.Second || hi != 5*time.Minute {
		t.Errorf("queue.backoff defaults (the engine's): got %s, %s, want 1s, 5m", lo, hi)
	}
	_, err := Load("", nil, withRequired(map[string]string{"sink.max_in_flight": "-1"}))
	if keys := problemKeys(t, err); !slices.Equal(keys, []string{"sink.max_in_flight"}) {
		t.Errorf("a bad sink.max_in_flight: got problems about %v, want it once; error:\n%v", keys, err)
	}
}

// pacer.adaptive is on unless the file turns it off, and its keys are
// checked by the pacer with their names.
func TestAdaptiveKeys(t *testing.T) {
	if c := mustLoad(t, "", nil, required()); !c.Pacer.Adaptive.Enabled {
		t.Error("pacer.adaptive.enabled: got false by default, want true")
	}
	c := mustLoad(t, "", []string{"SLUICE_PACER_ADAPTIVE_ENABLED=false", "SLUICE_PACER_ADAPTIVE_WINDOW=2s"}, required())
	if c.Pacer.Adaptive.Enabled || c.Pacer.Adaptive.Window != 2*time.Second {
		t.Errorf("from the environment: got %+v, want off with a 2s window", c.Pacer.Adaptive)
	}
	_, err := Load("", []string{"SLUICE_PACER_ADAPTIVE_TOLERANCE=0.9", "SLUICE_PACER_ADAPTIVE_MAX_HOLD=10ms"}, required())
	for _, want := range []string{"pacer.adaptive.tolerance", "pacer.adaptive.max_hold"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad %s: got %v, want an error naming it", want, err)
		}
	}
}
