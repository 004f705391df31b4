package config

import (
	"maps"
	"slices"
	"strings"
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

// pacer.tenants.rates from the environment: the rest of the variable's
// name is the tenant as written, case and '_' kept, since tenants are
// matched exactly; sink.headers' entries are still headers.
func TestTenantRatesFromTheEnvironment(t *testing.T) {
	c := mustLoad(t, "", []string{
		"SLUICE_PACER_TENANTS_RATES_acme=5",
		"SLUICE_PACER_TENANTS_RATES_big_corp=7",
		"SLUICE_PACER_TENANTS_RATES_GLOBEX=3",
		"SLUICE_SINK_HEADERS_x_api_key=k1",
	}, required())
	want := map[string]float64{"acme": 5, "big_corp": 7, "GLOBEX": 3}
	if got := c.PacerConfig().Tenants.Rates; !maps.Equal(got, want) {
		t.Errorf("pacer.tenants.rates = %v; want %v", got, want)
	}
	if got := c.Sink.Headers; len(got) != 1 || got["X-Api-Key"] != "k1" {
		t.Errorf("sink.headers = %v; want only X-Api-Key", slices.Sorted(maps.Keys(got)))
	}

	// The problem of a rates value that is no mapping says how to set one
	// from the environment, and following it sets that very tenant.
	_, err := Load("", []string{"SLUICE_PACER_TENANTS_RATES=acme:5"}, required())
	keys := problemKeys(t, err)
	hint := "SLUICE_PACER_TENANTS_RATES_acme sets acme"
	if !slices.Equal(keys, []string{"pacer.tenants.rates"}) || !strings.Contains(err.Error(), hint) {
		t.Errorf("got error\n%v\nwant one line, about pacer.tenants.rates, saying %q", err, hint)
	}
	c = mustLoad(t, "", []string{"SLUICE_PACER_TENANTS_RATES_acme=5"}, required())
	if got := c.PacerConfig().Tenants.Rates["acme"]; got != 5 {
		t.Errorf("following the hint: acme's rate %v, want 5", got)
	}
	_, err = Load("", []string{"SLUICE_SINK_HEADERS=x"}, required())
	if hint := "SLUICE_SINK_HEADERS_X_API_KEY sets X-Api-Key"; err == nil || !strings.Contains(err.Error(), hint) {
		t.Errorf("sink.headers given text: got error\n%v\nwant it to say %q", err, hint)
	}
}
