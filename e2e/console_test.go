package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// consoleToken is the admin token the console tests configure.
const consoleToken = "console-e2e-token"

// chromium returns the path of Debian's chromium, or skips the test where
// it is not installed (.ci/run installs it, so CI always runs the test).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): the browser test cannot run here")
	return ""
}

// browser starts a headless chromium for the test and returns its context.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root, where chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1400),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no timeout (it would stop the browser)
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// js evaluates expr in the page (awaiting a promise) and decodes its value
// into out.
func js[T any](t *testing.T, ctx context.Context, expr string, out *T) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %q: %v", expr, err)
	}
	*out = v
}

// run runs chromedp actions in order, within 20 s.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The console, served by a real dispatcher on real Redis, in headless
// chromium: the rate chart moves while jobs flow; an action without the
// token is refused, with it the cluster pauses and resumes; a dead letter
// is requeued and delivered; the page passes its accessibility check; a
// screenshot is saved (to the test's artifact directory, and to
// $SLUICE_CONSOLE_SCREENSHOT when set: the README's is made so).
func TestConsoleBrowser(t *testing.T) {
	exe := chromium(t)
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(consoleToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "redis", 40, "SLUICE_ADMIN_TOKEN_FILE="+tokFile)
	rejected := make(chan struct{})
	c.prov.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		if a.JobID == "vip-00002" {
			select {
			case <-rejected:
			default:
				close(rejected)
				return mockprovider.Answer{Status: 400, Body: `{"error":"unknown recipient","code":21211}`}
			}
		}
		return mockprovider.Answer{Status: 200}
	})
	c.enqueue("con", "bob", 4000) // 100 s at 40/s: jobs flow throughout
	c.enqueue("vip", "alice", 200)
	p := c.start(1)[0]
	murl, ok := p.metricsURL(30 * time.Second)
	if !ok {
		t.Fatal("the dispatcher did not log its metrics URL")
	}
	base := strings.TrimSuffix(murl, "/metrics") + "/console/"

	ctx := browser(t, exe)
	run(t, ctx, "open the console", chromedp.Navigate(base), chromedp.WaitVisible("#chart"))

	// The chart moves: points come with the heartbeats, and the achieved
	// rate shows the jobs flowing.
	var pts, achieved float64
	eventually(t, 30*time.Second, "the chart shows three points and an achieved rate over 20/s", func() bool {
		var v []string
		js(t, ctx, `[document.getElementById('chart').dataset.points, document.getElementById('chart').dataset.achieved]`, &v)
		pts, _ = strconv.ParseFloat(v[0], 64)
		achieved, _ = strconv.ParseFloat(v[1], 64)
		return pts >= 3 && achieved > 20
	})
	if achieved > 40*1.1 {
		t.Errorf("the chart shows %.1f/s achieved, over the 40/s cap", achieved)
	}
	var paths int
	js(t, ctx, `document.querySelectorAll('#chart path.lane').length`, &paths)
	if paths != 2 {
		t.Errorf("the chart draws %d lane lines, want 2 (vip, default)", paths)
	}

	// Without the token, an action is refused by the server...
	var status int
	js(t, ctx, `fetch('api/pause', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'}).then(r => r.status)`, &status)
	if status != http.StatusUnauthorized {
		t.Errorf("POST api/pause without the token: status %d, want 401", status)
	}
	// ... and so is one with a wrong token, through the page.
	run(t, ctx, "use a wrong token", chromedp.SetValue("#token", "wrong"), chromedp.Click("#token-form button[type=submit]"), chromedp.Click("#pause"))
	waitText(t, ctx, "#message", "token is missing or wrong")
	if st := c.admin("status"); strings.Contains(st, "PAUSED") {
		t.Fatalf("paused by a request with a wrong token:\n%s", st)
	}

	// With the token the cluster pauses: the provider gets nothing.
	run(t, ctx, "pause with the token", chromedp.SetValue("#token", consoleToken), chromedp.Click("#token-form button[type=submit]"), chromedp.Click("#pause"))
	waitText(t, ctx, "#status", "paused")
	if st := c.admin("status"); !strings.Contains(st, "PAUSED") {
		t.Errorf("status after the console's pause lacks PAUSED:\n%s", st)
	}
	if m := metricsText(t, murl); !strings.Contains(m, "sluice_pacer_paused 1") {
		t.Error("/metrics while paused lacks sluice_pacer_paused 1")
	}
	from := time.Now().Add(300 * time.Millisecond) // slots granted before the pause (one horizon) may still go
	eventually(t, 10*time.Second, "paused for 1s", func() bool { return time.Since(from) > time.Second })
	if n := len(mockprovider.Between(c.prov.Arrivals(), from, time.Now())); n != 0 {
		t.Errorf("%d requests while paused from the console, want 0", n)
	}
	// The replica logs the change once it sees it (its heartbeat reads the
	// schedule's state every 2 s).
	eventually(t, 10*time.Second, "the replica logs the pause", func() bool {
		b, _ := os.ReadFile(p.log)
		return strings.Contains(string(b), "sluice: operator: schedule paused")
	})
	run(t, ctx, "resume", chromedp.Click("#resume"))
	waitText(t, ctx, "#status", "running")

	// A rate override from the page reaches the schedule, and clears.
	run(t, ctx, "set the rate", chromedp.SetValue("#rate", "25"), chromedp.Click(`#rate-form button[type=submit]`))
	waitText(t, ctx, "#message", "Rate override set: 25/s")
	if st := c.admin("status"); !strings.Contains(st, "effective 25/s") {
		t.Errorf("status after the console's set rate lacks effective 25/s:\n%s", st)
	}
	run(t, ctx, "clear the rate", chromedp.Click("#clear-rate"))
	waitText(t, ctx, "#message", "Override cleared")
	if st := c.admin("status"); !strings.Contains(st, "effective 40/s") {
		t.Errorf("status after the console's clear lacks effective 40/s:\n%s", st)
	}

	// The dead letter is listed with the provider's answer, its payload
	// hidden until shown, and requeued from the page.
	<-rejected
	row := `#dead tr[data-id="vip-00002"]`
	run(t, ctx, "the dead letter is listed", chromedp.WaitVisible(row))
	waitText(t, ctx, row, "unknown recipient")
	var shown bool
	js(t, ctx, `document.querySelector('#dead pre') !== null`, &shown)
	if shown {
		t.Error("a payload is shown before it was asked for")
	}
	run(t, ctx, "show the payload", chromedp.Click(row+` button`))
	waitText(t, ctx, row+` pre`, "+15550000002")
	checkAccessibility(t, ctx) // with every part of the page filled in
	screenshot(t, ctx)
	run(t, ctx, "requeue it", chromedp.Click(row+` input[type=checkbox]`), chromedp.Click("#requeue-selected"))
	waitText(t, ctx, "#message", "Requeued 1")
	eventually(t, 60*time.Second, "the requeued job delivered", func() bool {
		for _, a := range c.prov.Arrivals() {
			if a.JobID == "vip-00002" && a.Status == 200 {
				return true
			}
		}
		return false
	})

	// Delete of a job that is no dead letter is refused with why.
	var del struct {
		Status int
		Body   string
	}
	js(t, ctx, fmt.Sprintf(`fetch('api/dlq/delete', {method: 'POST', headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer %s'},
		body: JSON.stringify({ids: ['x']})}).then(async r => ({Status: r.status, Body: await r.text()}))`, consoleToken), &del)
	if del.Status/100 == 2 || !strings.Contains(del.Body, "not a dead letter") {
		t.Errorf("delete of an unknown id: %d %s; want a refusal saying it is not a dead letter", del.Status, del.Body)
	}

	checkAuditLog(t, p)
}

// waitText waits until the element's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	var got string
	eventually(t, 15*time.Second, fmt.Sprintf("%s shows %q", sel, want), func() bool {
		js(t, ctx, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel), &got)
		return strings.Contains(got, want)
	})
}

// checkAccessibility runs the page's own checks: every control has an
// accessible name, the chart has a text alternative, the page has a
// language and a title, and all visible text meets WCAG 2 AA contrast
// (4.5:1, 3:1 for large text) against its background.
func checkAccessibility(t *testing.T, ctx context.Context) {
	t.Helper()
	var res struct {
		Problems []string
		Checked  int
	}
	js(t, ctx, a11yCheck, &res)
	if res.Checked < 50 {
		t.Errorf("the accessibility check looked at %d text elements only", res.Checked)
	}
	for _, p := range res.Problems {
		t.Errorf("accessibility: %s", p)
	}
}

const a11yCheck = `(() => {
  const problems = [];
  if (!document.documentElement.lang) problems.push('the page has no lang');
  if (!document.title) problems.push('the page has no title');
  const name = (e) => ((e.getAttribute('aria-label') || '') + ' ' + (e.labels ? [...e.labels].map(l => l.textContent).join(' ') : '')
    + ' ' + (e.tagName === 'INPUT' ? '' : e.textContent) + ' ' + (e.title || '')).trim();
  for (const e of document.querySelectorAll('input, select, textarea, button, a[href]')) {
    if (!name(e)) problems.push('no accessible name: ' + e.outerHTML.slice(0, 100));
  }
  for (const e of document.querySelectorAll('svg[role=img]')) {
    const ids = (e.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean);
    if (!ids.length || !ids.every(id => document.getElementById(id) && document.getElementById(id).textContent.trim())) problems.push('the chart has no text alternative');
  }
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const bg = (e) => { for (; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) return c; }
    return {r: 255, g: 255, b: 255, a: 1}; };
  let checked = 0;
  const seen = new Set();
  const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (w.nextNode()) {
    const n = w.currentNode, e = n.parentElement;
    if (!n.textContent.trim() || seen.has(e) || e.closest('.sr-only')) continue;
    seen.add(e);
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility === 'hidden') continue;
    const fg = e.closest('svg') ? parse(cs.fill) : parse(cs.color);
    if (!fg) continue;
    const l1 = lum(fg), l2 = lum(bg(e)), ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
    const need = (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5;
    checked++;
    if (ratio < need) problems.push('contrast ' + ratio.toFixed(2) + ' < ' + need + ' for "' + n.textContent.trim().slice(0, 40) + '"');
  }
  return {Problems: problems, Checked: checked};
})()`

// screenshot saves the page to the test's artifact directory and, when
// SLUICE_CONSOLE_SCREENSHOT is set, to that path.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(cctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	paths := []string{filepath.Join(t.ArtifactDir(), "console.png")}
	if p := os.Getenv("SLUICE_CONSOLE_SCREENSHOT"); p != "" {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
		}
		t.Logf("screenshot: %s", p)
	}
}

// checkAuditLog reads the replica's log for the console's audit records:
// the refused pause, the pause, the resume and the requeue.
func checkAuditLog(t *testing.T, p *proc) {
	t.Helper()
	var log string
	eventually(t, 10*time.Second, "the audit records and the operator's changes in the replica's log", func() bool {
		b, _ := os.ReadFile(p.log)
		log = string(b)
		return strings.Contains(log, `action=requeue`) && strings.Contains(log, "sluice: operator: schedule resumed")
	})
	for _, want := range []string{
		`msg="sluice: audit" via=console action=pause detail="" result="refused: wrong or missing token"`,
		`msg="sluice: audit" via=console action=pause detail="" result=done`,
		`msg="sluice: audit" via=console action=resume detail="" result=done`,
		`msg="sluice: operator: schedule paused; this replica sends nothing until resume"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the replica's log lacks %s", want)
		}
	}
}
