package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/setting"
)

// problem is one thing wrong with the configuration, about one key (or
// environment variable). Those found by a package's Validate wrap its
// sentinel; this package's own wrap none.
type problem = setting.Error

// problemf returns a problem about key.
func problemf(key, format string, args ...any) *problem {
	return setting.Errorf(nil, key, format, args...)
}

// problems collects what is wrong, at most one problem per key: the first
// found stands, so that a value refused when decoded is not reported again
// by a Validate that saw its zero value, and a lane checked both by the
// priority and the queue package is reported once.
type problems struct {
	list []*problem
	seen map[string]bool
}

func (ps *problems) add(p *problem) {
	if ps.seen == nil {
		ps.seen = map[string]bool{}
	}
	if ps.seen[p.Key] {
		return
	}
	ps.seen[p.Key] = true
	ps.list = append(ps.list, p)
}

func (ps *problems) addf(key, format string, args ...any) { ps.add(problemf(key, format, args...)) }

func (ps *problems) addAll(list []*problem) {
	for _, p := range list {
		ps.add(p)
	}
}

// addChecked adds the problems of a package's Validate, but those skip
// drops (nil keeps all).
func (ps *problems) addChecked(err error, skip func(*problem) bool) {
	for _, p := range setting.Errors(err) {
		if skip == nil || !skip(p) {
			ps.add(p)
		}
	}
}

// sortBySection orders the problems from the index from on by section, in
// the file's order, keeping the order within a section.
func (ps *problems) sortBySection(from int) {
	names := newSchema().sections[""]
	order := func(p *problem) int {
		section, _, _ := strings.Cut(p.Key, ".")
		return slices.Index(names, section)
	}
	slices.SortStableFunc(ps.list[from:], func(a, b *problem) int { return cmp.Compare(order(a), order(b)) })
}

// err is nil when nothing is wrong, and else every problem in one error
// matching ErrInvalid, one line each: "key: problem".
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	lines := make([]error, len(ps.list))
	for i, p := range ps.list {
		lines[i] = line{p}
	}
	return fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(lines...))
}

// line shows a problem without its package's sentinel, which it wraps.
type line struct{ p *problem }

func (l line) Error() string { return l.p.Key + ": " + l.p.Problem }

func (l line) Unwrap() error { return l.p }

// joinProblems returns problems as one error matching ErrInvalid.
func joinProblems(list []*problem) error {
	var ps problems
	ps.addAll(list)
	return ps.err()
}
