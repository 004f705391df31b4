package config

import (
	"slices"
	"testing"
)

// pacer.tenants: a default rate and per-tenant rates from the file, the
// default rate from the environment, and bad values refused by key.
func TestTenantKeys(t *testing.T) {
	path := writeFile(t, "sluice.yaml", `
pacer:
  tenants:
    default_rate: 50
    rates: {acme: 20, globex: 5.5}
`)
	c := mustLoad(t, path, nil, required())
	tn := c.PacerConfig().Tenants
	if tn.DefaultRate != 50 || tn.Rates["acme"] != 20 || tn.Rates["globex"] != 5.5 || len(tn.Rates) != 2 {
		t.Errorf("pacer.tenants = %+v; want default_rate 50, rates acme 20, globex 5.5", tn)
	}
	c = mustLoad(t, path, []string{"SLUICE_PACER_TENANTS_DEFAULT_RATE=7"}, required())
	if got := c.PacerConfig().Tenants.DefaultRate; got != 7 {
		t.Errorf("SLUICE_PACER_TENANTS_DEFAULT_RATE=7: default_rate %v, want 7", got)
	}

	bad := writeFile(t, "bad.yaml", `
pacer:
  tenants:
    default_rate: -1
    rates: {acme: 0}
`)
	_, err := Load(bad, nil, required())
	keys := problemKeys(t, err)
	for _, want := range []string{"pacer.tenants.default_rate", "pacer.tenants.rates.acme"} {
		if !slices.Contains(keys, want) {
			t.Errorf("problems name %v; want %s among them", keys, want)
		}
	}
}

// sink.max_in_flight_total: off by default, set from the environment, and
// a negative value refused by key.
func TestMaxInFlightTotalKey(t *testing.T) {
	c := mustLoad(t, "", nil, required())
	if got := c.Sink.MaxInFlightTotal; got != 0 {
		t.Errorf("default sink.max_in_flight_total %d, want 0 (off)", got)
	}
	c = mustLoad(t, "", []string{"SLUICE_SINK_MAX_IN_FLIGHT_TOTAL=12"}, required())
	if got := c.Sink.MaxInFlightTotal; got != 12 {
		t.Errorf("SLUICE_SINK_MAX_IN_FLIGHT_TOTAL=12: got %d", got)
	}
	_, err := Load("", []string{"SLUICE_SINK_MAX_IN_FLIGHT_TOTAL=-1"}, required())
	if keys := problemKeys(t, err); !slices.Contains(keys, "sink.max_in_flight_total") {
		t.Errorf("problems name %v; want sink.max_in_flight_total", keys)
	}
}
