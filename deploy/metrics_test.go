package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/replica"
	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// prometheusSeries are the series Prometheus makes itself for each scrape
// target; no exporter exports them.
var prometheusSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped"}

// provider answers like a real one, by the job's payload "kind": "reject"
// is refused for good (400), "fail-once" fails once (500) then succeeds,
// "throttle-once" is throttled once (429, Retry-After: 1) then succeeds;
// anything else succeeds.
type provider struct {
	mu   sync.Mutex
	seen map[string]int // requests per job id
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Kind string `json:"kind"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.seen[r.Header.Get("X-Sluice-Job-Id")]++
	n := p.seen[r.Header.Get("X-Sluice-Job-Id")]
	p.mu.Unlock()
	switch {
	case body.Kind == "reject":
		http.Error(w, `{"error":"invalid number"}`, http.StatusBadRequest)
	case body.Kind == "fail-once" && n == 1:
		http.Error(w, "try later", http.StatusInternalServerError)
	case body.Kind == "throttle-once" && n == 1:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// startReplica runs one replica built as cmd/dispatcher builds it, on the
// Compose stack's configuration, against real Redis and NATS servers and
// the provider, and serves its endpoints. It returns the endpoints' URL and
// the replica's producer.
func startReplica(t *testing.T, prov http.Handler) (string, *producer.Producer) {
	t.Helper()
	rs := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, rs)
	ns := testnats.Start(t)
	provSrv := httptest.NewServer(prov)
	t.Cleanup(provSrv.Close)

	p := loadProject(t, nil)
	src, _ := mountSource(t, service(t, p, "dispatcher-1"), configTarget)
	cfg, err := config.Load(src, environ(service(t, p, "dispatcher-1")), map[string]string{
		"sink.url":       provSrv.URL + "/send",
		"metrics.listen": "off",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	parts, err := replica.Open(ctx, cfg, replica.Options{ID: "deploy-test", Redis: rs.Client(), NATS: ns.Conn(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r, err := replica.New(parts)
	if err != nil {
		cancel()
		_ = parts.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	endpoints := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		endpoints.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica run: %v", err)
		}
		if err := parts.Close(); err != nil {
			t.Errorf("replica close: %v", err)
		}
	})
	prod, err := producer.New(parts.Queue, cfg.PriorityConfig())
	if err != nil {
		t.Fatal(err)
	}
	return endpoints.URL, prod
}

// scrape reads /metrics into metric families.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// family returns the family a PromQL metric name selects from (a
// histogram's _bucket, _sum and _count select from the histogram), or nil.
func family(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	if f, ok := fams[name]; ok && f.GetType() != dto.MetricType_HISTOGRAM {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := fams[base]; f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
				return f
			}
		}
	}
	return nil
}

// selects reports whether sel matches at least one series of f. Labels
// Prometheus adds at scrape time (job, instance) and matchers on a
// Grafana variable ($lane) match anything.
func selects(sel *parser.VectorSelector, f *dto.MetricFamily) bool {
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, lm := range sel.LabelMatchers {
			switch {
			case lm.Name == "__name__", lm.Name == "job", lm.Name == "instance", strings.Contains(lm.Value, "$"):
			default:
				ok = ok && lm.Matches(labels[lm.Name])
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkSelectors fails the test for every selector of the dashboard and
// the alerts that selects no series of the scrape: a metric the replica
// does not export, or a label value it never gives.
func checkSelectors(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for _, u := range queriedSelectors(t) {
		if slices.Contains(prometheusSeries, u.sel.Name) {
			continue
		}
		f := family(fams, u.sel.Name)
		switch {
		case f == nil:
			t.Errorf("%s: %s is not exported by the replica", u.where, u.sel.Name)
		case !selects(u.sel, f):
			t.Errorf("%s: %s selects none of the replica's series", u.where, u.sel)
		}
	}
}

// sum adds the values of a family's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, v := range want {
			ok = ok && slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v })
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// enqueueEveryAnswer enqueues jobs that draw each of the provider's
// answers once (see provider), ordinary ones, and a third from the
// privileged user alice (the vip lane). It returns how many.
func enqueueEveryAnswer(t *testing.T, prod *producer.Producer) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kinds := []string{"reject", "fail-once", "throttle-once"}
	const ordinary = 9
	for i := range ordinary + len(kinds) {
		kind, user := "ok", "bob"
		if i < len(kinds) {
			kind = kinds[i]
		}
		if i%3 == 0 {
			user = "alice"
		}
		job := &queue.Job{User: user, Payload: json.RawMessage(fmt.Sprintf(`{"kind":%q,"n":%d}`, kind, i))}
		if _, err := prod.Enqueue(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	return ordinary + len(kinds)
}

func TestEveryQueriedMetricIsExportedByARunningReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a replica on real Redis and NATS: skipped with -short")
	}
	base, prod := startReplica(t, &provider{seen: map[string]int{}})
	// Every job but the rejected one is delivered in the end: the failed
	// one after its backoff, the throttled one after the Retry-After.
	wantDelivered := float64(enqueueEveryAnswer(t, prod) - 1)
	var fams map[string]*dto.MetricFamily
	eventually(t, 45*time.Second, "all jobs settled", func() bool {
		fams = scrape(t, base)
		return sum(fams, "sluice_jobs_total", map[string]string{"outcome": "delivered"}) == wantDelivered &&
			sum(fams, "sluice_dead_letters_total", nil) == 1
	})
	for _, c := range []struct {
		name  string
		want  map[string]string
		value float64
	}{
		{"sluice_dead_letters_total", map[string]string{"reason": "permanent"}, 1},
		{"sluice_retries_total", nil, 1},
		{"sluice_throttle_events_total", nil, 1},
		{"sluice_jobs_total", map[string]string{"lane": "vip", "outcome": "delivered"}, 3},
		{"sluice_queue_dead_letters", nil, 1},
		{"sluice_provider_latency_seconds", nil, wantDelivered + 3},
	} {
		if got := sum(fams, c.name, c.want); got != c.value {
			t.Errorf("%s%v = %g, want %g", c.name, c.want, got, c.value)
		}
	}

	checkSelectors(t, fams)
}
