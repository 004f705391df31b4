package mockprovider

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Answer is what the provider replies to one request.
type Answer struct {
	// Status is the HTTP status. Zero means 200.
	Status int
	// RetryAfter, when positive, is sent as the Retry-After header in whole
	// seconds, rounded up.
	RetryAfter time.Duration
	// Delay holds this answer back, on top of Config.Latency; a way to make
	// a sink time out. Zero means none.
	Delay time.Duration
	// Body is the response body. Empty means a small JSON body that suits
	// the status: {"id": "...", "status": "accepted"} for a 2xx, else
	// {"error": "..."}.
	Body string
}

// Responder chooses the answer to one arrival. The provider calls it for
// each request in arrival order, one call at a time, so a Responder may
// keep state without locking. The Arrival has every field set but Status
// and RetryAfter. A Responder may read the provider (Arrivals, Report) but
// must not call SetResponder or Reset.
type Responder func(Arrival) Answer

// Sequence returns a Responder that gives the answers in order, one per
// request, and 200 to every request after them. For "429 with Retry-After:
// 1 once, then 200":
//
//	p.SetResponder(mockprovider.Sequence(mockprovider.Answer{Status: 429, RetryAfter: time.Second}))
func Sequence(answers ...Answer) Responder {
	var mu sync.Mutex // the provider serialises calls; this guards sharing across providers
	i := 0
	return func(Arrival) Answer {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(answers) {
			return Answer{Status: http.StatusOK}
		}
		i++
		return answers[i-1]
	}
}

// shares is the default Responder: a seeded random draw per request.
type shares struct {
	cfg Config
	rng *rand.Rand
}

func newShares(cfg Config) *shares {
	s := uint64(cfg.Seed)
	return &shares{cfg: cfg, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// answer draws one number and maps it to 429, 500, 400 or 200 by the
// configured shares, in that order.
func (s *shares) answer(Arrival) Answer {
	u := s.rng.Float64()
	switch {
	case u < s.cfg.ThrottleShare:
		return Answer{Status: http.StatusTooManyRequests, RetryAfter: s.cfg.RetryAfter}
	case u < s.cfg.ThrottleShare+s.cfg.ErrorShare:
		return Answer{Status: http.StatusInternalServerError}
	case u < s.cfg.ThrottleShare+s.cfg.ErrorShare+s.cfg.RejectShare:
		return Answer{Status: http.StatusBadRequest,
			Body: `{"error":"rejected","code":"invalid_recipient","message":"the provider refuses this request"}`}
	default:
		return Answer{Status: http.StatusOK}
	}
}

// defaultBody is the body sent when an Answer has none.
func defaultBody(status int, a Arrival) string {
	var v any
	switch {
	case status >= 200 && status < 300:
		v = map[string]any{"id": "msg-" + a.identity(), "status": "accepted", "seq": a.Seq}
	case status == http.StatusTooManyRequests:
		v = map[string]string{"error": "rate limited"}
	default:
		v = map[string]string{"error": http.StatusText(status)}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
