package console

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Report is what a replica announces about itself with each heartbeat
// (pacer.Members.Announce), as one line of key=value words:
//
//	sending=3 held=40 admin=127.0.0.1:41234 sent=vip:120,default:4000
type Report struct {
	// Sending is the number of requests open to the provider.
	Sending int `json:"sending"`
	// Held is the number of fetched jobs waiting for their slots, unsent.
	// Sending plus Held is what the queue counts as in flight for this
	// replica.
	Held int `json:"held"`
	// Admin is the address of the replica's admin listener (metrics and
	// console), "" when it has none.
	Admin string `json:"admin,omitempty"`
	// Sent is the number of requests sent since the replica started, per
	// lane.
	Sent map[string]int64 `json:"sent"`
}

// String formats r as ParseReport reads it.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString("sending=" + strconv.Itoa(r.Sending) + " held=" + strconv.Itoa(r.Held))
	if r.Admin != "" {
		b.WriteString(" admin=" + r.Admin)
	}
	if len(r.Sent) > 0 {
		b.WriteString(" sent=")
		for i, l := range slices.Sorted(maps.Keys(r.Sent)) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l + ":" + strconv.FormatInt(r.Sent[l], 10))
		}
	}
	return b.String()
}

// ParseReport reads a replica's report. Words it does not know are
// skipped, so that replicas of other versions can be listed: the report of
// earlier versions, "in_flight=N", reads as Sending N.
func ParseReport(s string) Report {
	r := Report{Sent: map[string]int64{}}
	for _, w := range strings.Fields(s) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "sending", "in_flight":
			r.Sending, _ = strconv.Atoi(v)
		case "held":
			r.Held, _ = strconv.Atoi(v)
		case "admin":
			r.Admin = v
		case "sent":
			for _, lc := range strings.Split(v, ",") {
				lane, n, ok := strings.Cut(lc, ":")
				if c, err := strconv.ParseInt(n, 10, 64); ok && err == nil {
					r.Sent[lane] = c
				}
			}
		}
	}
	return r
}
