// Package mockprovider is a stand-in for the third-party HTTP provider that
// sluice's HTTP sink delivers to: a real HTTP server that records every
// request it receives and answers it the way a rate-capped provider would.
// The demo runs it in-process, the end-to-end tests and benchmarks run it
// either in-process or as the cmd/mockprovider binary.
//
// # Answers
//
// By default each request is answered at random, deterministically for a
// given [Config.Seed]: a share of them 429 with Retry-After
// ([Config.ThrottleShare]), a share 500 ([Config.ErrorShare]), a share 400
// with a JSON error body ([Config.RejectShare]) and the rest 200.
// [Provider.SetResponder] replaces that choice, for instance with
// [Sequence] to say "429 with Retry-After: 1 once, then 200".
//
// # What is recorded
//
// Every POST, PUT, PATCH or DELETE to [Config.Path] or below it (a job's
// own request.path) is an [Arrival]: the time the request reached this
// host (on Linux the kernel's receive time of its bytes, so that the
// provider's own scheduling delays do not bunch arrivals that came
// evenly; see recvstamp.go), with Go's monotonic reading, so in-process
// differences are immune to wall-clock steps, the method and the path with its query, the X-Sluice-Job-Id,
// X-Sluice-Lane, X-Sluice-Attempt, Idempotency-Key and X-Sluice-Enqueued-At
// headers, and the status answered; with [Config.KeepBodies], every header
// and the body too (JSON in Body, anything else byte for byte in RawBody).
// A body sent as JSON that is not JSON is answered 400; a form or text body
// is not. Memory is bounded by [Config.MaxArrivals]: past it the oldest
// arrivals are forgotten and counted in [Report.Dropped].
//
// # Reading the results
//
// [Provider.Report] (and [Summarize] for arrivals gathered elsewhere)
// computes counts, duplicates, mean rate against the cap, the most arrivals
// in any half-open sliding window [t, t+1s) and [t, t+100ms),
// inter-arrival percentiles and per-lane enqueue-to-arrival latency.
// [Provider.WriteChart] draws requests per 100 ms per lane with the cap.
//
// Over HTTP, beside the provider's own path: GET /report (JSON, optional
// since and until query parameters in RFC 3339), GET /arrivals (the raw
// records as JSON lines), POST /reset (forget everything), POST
// /capacity?rps=N (change Config.Capacity) and GET /healthz.
package mockprovider
