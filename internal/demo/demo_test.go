package demo

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A short demo on each backend delivers every job once, at the cap,
// privileged jobs first, and writes its chart.
func TestDemo(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) {
			var out bytes.Buffer
			chart := filepath.Join(t.TempDir(), "demo.svg")
			res, err := Run(context.Background(), Options{
				Backend: backend, Jobs: 300, Rate: 100, Chart: chart, Timeout: time.Minute,
				Out: &out, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			rep := res.Report
			if rep.Delivered != 300 || rep.Duplicates != 0 {
				t.Errorf("delivered %d, duplicates %d; want 300, 0", rep.Delivered, rep.Duplicates)
			}
			// A slot whose request cannot leave within pacer.max_lateness
			// is forfeited, and a loaded machine under the race detector
			// forfeits many: the mean says the demo paces, not how fast
			// the machine is. dispatch's TestInProcessPipeline accounts
			// for every slot.
			if rep.MeanOverCap < 0.6 || rep.Max1s > 100+2+2 {
				t.Errorf("mean/cap %.3f, max 1s %d; want at least 0.6 and at most 104", rep.MeanOverCap, rep.Max1s)
			}
			p50 := map[string]time.Duration{}
			for _, l := range rep.Lanes {
				p50[l.Lane] = l.LatencyP50
			}
			if p50["vip"] == 0 || p50["vip"] >= p50["default"] {
				t.Errorf("latency p50: vip %s, default %s; want privileged jobs first", p50["vip"], p50["default"])
			}
			for _, want := range []string{"provider", "vip", "default", "mean/cap", "chart (requests per 100ms, cap drawn in): " + chart} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if fi, err := os.Stat(chart); err != nil || fi.Size() == 0 {
				t.Errorf("chart %s: %v", chart, err)
			}
		})
	}
}

func TestDemoBadBackend(t *testing.T) {
	if _, err := Run(context.Background(), Options{Backend: "kafka", Out: io.Discard}); err == nil || !strings.Contains(err.Error(), "backend") {
		t.Errorf("Run with backend kafka: %v, want an error naming the backend", err)
	}
}
