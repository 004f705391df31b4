package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// Ingest benchmark sizes: clients at once, and jobs per way of enqueueing.
const (
	ingestClients = 8
	ingestSingle  = 4000  // one job per request or call
	ingestBatched = 40000 // in batches of 100
	ingestBatch   = 100
)

// TestBenchIngest prints, for `make bench`, how many jobs per second enter
// the queue through `dispatcher serve-api` (one job per request, and
// batches of 100) beside the Go producer on the same queue, with 8 clients
// at once, on real Redis and NATS. It runs only with SLUICE_BENCH=1.
func TestBenchIngest(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") == "" {
		t.Skip("set SLUICE_BENCH=1 (make bench) to run the ingest benchmark")
	}
	var rows [][]string
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			c := newCluster(t, backend, 100)
			api := startAPI(t, c)
			p, err := producer.New(c.q, c.prio)
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ingestClients}}
			defer client.CloseIdleConnections()
			post := func(body []byte) error {
				req, err := http.NewRequestWithContext(t.Context(), "POST", api+"/jobs", bytes.NewReader(body))
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+apiToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("status %d: %s", resp.StatusCode, b)
				}
				return nil
			}
			jobJSON := func(tag string, i int) string {
				return fmt.Sprintf(`{"key":"%s-%d","payload":{"to":"+1555%07d","text":"bench"}}`, tag, i, i)
			}
			batchOf := func(tag string, b int) []byte {
				parts := make([]string, ingestBatch)
				for k := range parts {
					parts[k] = jobJSON(tag, b*ingestBatch+k)
				}
				return []byte(`{"jobs":[` + strings.Join(parts, ",") + `]}`)
			}
			goJob := func(tag string, i int) *queue.Job {
				return &queue.Job{Key: fmt.Sprintf("%s-%d", tag, i), Payload: json.RawMessage(fmt.Sprintf(`{"to":"+1555%07d","text":"bench"}`, i))}
			}
			runtime.GC()
			httpOne := rate(t, ingestSingle, 1, func(i int) error { return post([]byte(jobJSON("h1", i))) })
			httpBatch := rate(t, ingestBatched, ingestBatch, func(b int) error { return post(batchOf("hb", b)) })
			goOne := rate(t, ingestSingle, 1, func(i int) error { _, err := p.Enqueue(t.Context(), goJob("g1", i)); return err })
			goBatch := rate(t, ingestBatched, ingestBatch, func(b int) error {
				jobs := make([]*queue.Job, ingestBatch)
				for k := range jobs {
					jobs[k] = goJob("gb", b*ingestBatch+k)
				}
				_, err := p.EnqueueBatch(t.Context(), jobs)
				return err
			})
			rows = append(rows,
				[]string{"HTTP API, one job per request", backend, fmt.Sprintf("%.0f jobs/s", httpOne)},
				[]string{"HTTP API, batches of 100", backend, fmt.Sprintf("%.0f jobs/s", httpBatch)},
				[]string{"Go producer, one job per call", backend, fmt.Sprintf("%.0f jobs/s", goOne)},
				[]string{"Go producer, batches of 100", backend, fmt.Sprintf("%.0f jobs/s", goBatch)})
			st, err := c.q.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var stored int64
			for _, l := range st.Lanes {
				stored += l.Ready + l.Delayed + l.InFlight
			}
			if want := int64(2 * (ingestSingle + ingestBatched)); stored != want {
				t.Errorf("jobs stored: got %d, want %d", stored, want)
			}
		})
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\ningest, %d clients at once\tbackend\tresult\n", ingestClients)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	fmt.Printf("\ndispatcher serve-api and the Go producer (in the test process) on one redis-server or embedded NATS; %d CPUs\n", runtime.NumCPU())
}

// rate runs send for calls 0..jobs/per-1 from ingestClients goroutines
// and returns jobs per second; it fails the test on the first error.
func rate(t *testing.T, jobs, per int, send func(i int) error) float64 {
	t.Helper()
	calls := jobs / per
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var failed error
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	for range ingestClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				if err := send(i); err != nil {
					once.Do(func() { failed = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("ingest: %v", failed)
	}
	return float64(jobs) / time.Since(start).Seconds()
}
