package mockprovider_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// paced returns n arrivals 1/rate apart, alternating lanes vip and default.
func paced(n int, rate float64) []mockprovider.Arrival {
	out := make([]mockprovider.Arrival, n)
	for i := range out {
		lane := "default"
		if i%3 == 0 {
			lane = "vip"
		}
		out[i] = mockprovider.Arrival{At: t0.Add(time.Duration(float64(i) / rate * float64(time.Second))), Lane: lane, Status: 200}
	}
	return out
}

func TestWriteChartSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	if err := mockprovider.WriteChart(path, paced(500, 200), 200); err != nil {
		t.Fatalf("WriteChart: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A well-formed XML document whose root is <svg>, with the legend.
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element: got %q, want svg", root)
	}
	for _, want := range []string{"vip", "default", "total", "cap 200/s", "requests per 100 ms"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestProviderWriteChartPNG(t *testing.T) {
	p := start(t, mockprovider.Config{Cap: 50})
	c := newClient(t)
	for i := range 20 {
		post(t, c, p.URL(), `{}`, jobHeaders(strings.Repeat("j", i+1), "vip", 1, time.Now()))
	}
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := p.WriteChart(path); err != nil {
		t.Fatalf("WriteChart: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("PNG size: got %v, want a real picture", b)
	}
}

func TestChartErrors(t *testing.T) {
	dir := t.TempDir()
	if err := mockprovider.WriteChart(filepath.Join(dir, "c.svg"), nil, 10); !errors.Is(err, mockprovider.ErrNoArrivals) {
		t.Errorf("no arrivals: got %v, want ErrNoArrivals", err)
	}
	if err := mockprovider.WriteChart(filepath.Join(dir, "c.bmp"), paced(3, 10), 10); err == nil {
		t.Errorf("unknown extension .bmp: got no error")
	}
}
