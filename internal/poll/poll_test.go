package poll

import (
	"fmt"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	Until(t, time.Second, time.Millisecond, "three calls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Until(ft, 10*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	}()
	if ft.msg != "after 10ms: not yet never" {
		t.Errorf("failure message %q", ft.msg)
	}
}

type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
