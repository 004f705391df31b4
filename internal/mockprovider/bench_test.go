package mockprovider_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// BenchmarkHandler measures recording and answering one job, without the
// network.
func BenchmarkHandler(b *testing.B) {
	p, err := mockprovider.New(mockprovider.Config{ThrottleShare: 0.01})
	if err != nil {
		b.Fatal(err)
	}
	h := p.Handler()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/send", strings.NewReader(`{"to":"+15550100","text":"hi"}`))
		req.Header.Set(mockprovider.HeaderJobID, strconv.Itoa(i))
		req.Header.Set(mockprovider.HeaderLane, "vip")
		req.Header.Set(mockprovider.HeaderAttempt, "1")
		req.Header.Set(mockprovider.HeaderEnqueuedAt, time.Now().Format(time.RFC3339Nano))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// BenchmarkSummarize measures a report over 100,000 arrivals.
func BenchmarkSummarize(b *testing.B) {
	a := paced(100_000, 400)
	for i := range a {
		a[i].JobID = strconv.Itoa(i)
		a[i].EnqueuedAt = a[i].At.Add(-time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		mockprovider.Summarize(a, 400)
	}
}
