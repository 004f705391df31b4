package natsq

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Every stream, subject, consumer and message id natsq uses is built here.
//
// Queue and lane names are 1-64 letters, digits, '_' or '-' (queue.Config
// validates them), so they are always single subject tokens and valid
// stream and consumer names. The layout keeps every name apart whatever the
// lanes are called:
//
//	stream SLUICE_<queue>      subjects sluice.<queue>.ready.*  (work queue)
//	                                    sluice.<queue>.delayed.*
//	stream SLUICEDLQ_<queue>   subject  sluice.<queue>.dead     (limits)
//	consumer lane_<lane>       filter   sluice.<queue>.ready.<lane>
//	consumer delayed           filter   sluice.<queue>.delayed.*
//
// The two stream name prefixes differ before the queue name ("SLUICE_" and
// "SLUICEDLQ_"), so no queue's main stream can be another queue's dead
// letter stream, and the dead letter subject has one token fewer than the
// lane subjects, so the two streams' subjects never overlap.
type names struct {
	queue string
}

func (n names) stream() string     { return "SLUICE_" + n.queue }
func (n names) deadStream() string { return "SLUICEDLQ_" + n.queue }

func (n names) ready(lane string) string   { return "sluice." + n.queue + ".ready." + lane }
func (n names) delayed(lane string) string { return "sluice." + n.queue + ".delayed." + lane }
func (n names) readyAll() string           { return "sluice." + n.queue + ".ready.*" }
func (n names) delayedAll() string         { return "sluice." + n.queue + ".delayed.*" }
func (n names) dead() string               { return "sluice." + n.queue + ".dead" }

// laneConsumer is the durable pull consumer of one lane.
func (names) laneConsumer(lane string) string { return "lane_" + lane }

// delayedConsumer is the durable pull consumer that moves due jobs from the
// delayed subjects into their lanes.
func (names) delayedConsumer() string { return "delayed" }

// laneOf returns the lane token (the last) of a ready or delayed subject.
func laneOf(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// Message ids (the Nats-Msg-Id header), deduplicated by the stream within
// the dedup window. A job's idempotency key is hashed, so that any key is a
// safe header value. Every message natsq writes on behalf of another one
// (retry, move, dead letter, requeue) takes an id from the source message's
// stream sequence and store time, so a repeated attempt after a lost reply
// stores nothing twice, and ids stay unique if a stream is deleted and made
// again.
func keyMsgID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "k:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func derivedMsgID(kind string, seq uint64, stored time.Time) string {
	return kind + ":" + strconv.FormatUint(seq, 10) + ":" + strconv.FormatInt(stored.UnixNano(), 36)
}

// Headers natsq sets besides Nats-Msg-Id. Values are natsq's own formats,
// never producer text (ids, keys and reasons live in the JSON body).
const (
	// hdrDue is when a message on a delayed subject becomes due (RFC 3339).
	hdrDue = "Sluice-Due"
	// hdrDeadAt is when a dead letter was written (RFC 3339).
	hdrDeadAt = "Sluice-Dead-At"
)
