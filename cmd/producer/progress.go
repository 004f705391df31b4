package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress draws a progress bar on stderr, or nothing. Its methods do
// nothing on a nil *progress.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress returns a bar counting to total (bytes when bytes is set,
// else jobs; total -1 when unknown), or nil when the bar is off.
func (g *globals) newProgress(total int64, desc string, bytes bool) *progress {
	if !g.showProgress() {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(g.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		// No spinner goroutine for a bar of unknown length: it redraws on Add.
		progressbar.OptionSetSpinnerChangeInterval(0),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("jobs"))
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

// showProgress says whether --progress wants a bar. With auto, the bar is
// drawn only when stderr is a terminal: it redraws one line with carriage
// returns, which would fill a log file or a pipe with partial lines.
// progressbar itself does not check (it asks the terminal only for its
// width), so golang.org/x/term decides, on the file descriptor.
func (g *globals) showProgress() bool {
	switch g.progress {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := g.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *progress) add(n int) {
	if p != nil {
		_ = p.bar.Add(n)
	}
}

// clear removes the bar from the screen, so that a message can be printed;
// the next add draws it again.
func (p *progress) clear() {
	if p != nil {
		_ = p.bar.Clear()
	}
}

// finish clears the bar for good.
func (p *progress) finish() {
	if p != nil {
		_ = p.bar.Clear()
		_ = p.bar.Exit()
	}
}

// report prints a message line on w, clearing the bar first.
func (p *progress) report(w io.Writer, line string) {
	p.clear()
	_, _ = io.WriteString(w, line+"\n")
}
