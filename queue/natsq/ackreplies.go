package natsq

import (
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// ackReplies is the queue's one subscription for the server's
// confirmations of acks: each ack of AckBatch is sent with a reply subject
// of its own under one inbox, and the confirmation is routed to the batch
// that waits for it. One subscription for the queue's life, instead of one
// per batch, spares the server a subscribe and an unsubscribe (and a
// rebuilt routing cache) per batch of acks.
//
// It is opened with the first batch and closed once Close was called and
// no batch uses it; a batch after Close opens a subscription of its own.
type ackReplies struct {
	mu      sync.Mutex
	sub     *nats.Subscription
	prefix  string // the inbox; reply subjects are prefix.<token>
	next    uint64
	waiting map[uint64]ackWaiter
	users   int  // batches using sub now
	closing bool // Close was called: the last user unsubscribes
	opened  int  // subscriptions opened so far
}

// ackWaiter is where the confirmation of one ack goes: the index of the
// ack in its batch, on the batch's channel.
type ackWaiter struct {
	ch chan<- ackConfirm
	i  int
}

// ackConfirm is a confirmation for the ack at index i of a batch.
type ackConfirm struct {
	i   int
	msg *nats.Msg
}

// acquire opens the shared subscription when needed and counts the
// caller as a user until release. ok is false after Close: the caller
// subscribes on its own.
func (a *ackReplies) acquire(nc *nats.Conn) (ok bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return false, nil
	}
	if a.sub == nil {
		prefix := nats.NewInbox()
		sub, err := nc.Subscribe(prefix+".*", a.route)
		if err != nil {
			return false, err
		}
		a.sub, a.prefix, a.waiting = sub, prefix, map[uint64]ackWaiter{}
		a.opened++
	}
	a.users++
	return true, nil
}

// expect registers a waiter and returns its reply subject.
func (a *ackReplies) expect(ch chan<- ackConfirm, i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	a.waiting[a.next] = ackWaiter{ch: ch, i: i}
	return a.prefix + "." + strconv.FormatUint(a.next, 10)
}

// forget drops the waiters of subjects that got no confirmation.
func (a *ackReplies) forget(subjects []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range subjects {
		if tok, ok := token(s); ok {
			delete(a.waiting, tok)
		}
	}
}

// release ends a batch's use; the last user after Close unsubscribes.
func (a *ackReplies) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users--
	if a.closing && a.users == 0 {
		a.unsubscribeLocked()
	}
}

// close makes later batches subscribe on their own, and unsubscribes now
// when no batch uses the subscription.
func (a *ackReplies) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closing = true
	if a.users == 0 {
		a.unsubscribeLocked()
	}
}

func (a *ackReplies) unsubscribeLocked() {
	if a.sub != nil {
		_ = a.sub.Unsubscribe()
		a.sub, a.waiting = nil, nil
	}
}

// route hands a confirmation to the batch waiting for it; one nobody
// waits for (its batch gave up) is dropped.
func (a *ackReplies) route(m *nats.Msg) {
	tok, ok := token(m.Subject)
	if !ok {
		return
	}
	a.mu.Lock()
	w, found := a.waiting[tok]
	delete(a.waiting, tok)
	a.mu.Unlock()
	if found {
		w.ch <- ackConfirm{i: w.i, msg: m} // buffered for the whole batch
	}
}

// token is the number after a reply subject's last dot.
func token(subject string) (uint64, bool) {
	n, err := strconv.ParseUint(subject[strings.LastIndexByte(subject, '.')+1:], 10, 64)
	return n, err == nil
}
