// Package sink delivers one job to the provider and classifies the answer.
//
// A Sender's Send returns nil when the job was delivered, and otherwise an
// error that matches one of three sentinels with errors.Is, telling the
// dispatch engine what to do with the job:
//
//	answer                                   error                       engine
//	---------------------------------------  --------------------------  ------------------------------
//	2xx                                      nil                         ack
//	429, 503                                 *ThrottledError             retry later; whole cluster
//	                                         (ErrThrottled) with the     holds back for RetryAfter
//	                                         Retry-After, zero if none
//	408, other 5xx                           *StatusError (ErrTransient) retry after backoff
//	no answer within the timeout             ErrTransient, and           retry after backoff
//	                                         context.DeadlineExceeded
//	connection refused, reset, DNS, TLS      ErrTransient                retry after backoff
//	caller's ctx ended                       ErrTransient, and ctx.Err() retry after backoff
//	other 4xx, any 3xx (never followed)      *StatusError (ErrPermanent) dead-letter, err.Error() as
//	                                                                     the reason
//	none: the job is outside the bounds      ErrPermanent, naming the    dead-letter, never sent
//	(Bounds: another host, a reserved        field (request.url: ...)    elsewhere
//	header, a payload form cannot carry)
//	none: the gate refused (WithGate)        the gate's error: ErrLate   forfeit the slot; the job
//	                                         (none of the three above)   goes again on a later slot
//
// Retry-After is read as seconds ("120") or as an HTTP-date ("Wed, 21 Oct
// 2026 07:28:00 GMT"); an unreadable, negative or past value counts as
// zero. A date is counted from the answer's Date header when it has one
// (both are the provider's clock, so a replica's clock that is off does
// not matter), from this replica's clock when not. It is ignored on any
// status but 429 and 503.
//
// A *StatusError's text carries the status and the first 512 bytes of the
// provider's answer (MaxBodyExcerpt), trimmed and made printable, so that
// it can serve as the dead-letter reason. No error ever carries the job's
// payload, the URL's credentials or query, or a configured header's value.
//
// The gate is how the engine keeps each request within its pacer slot's
// lateness bound: it carries a check in the context (WithGate) that the
// sink runs as the very last step before the request leaves (the HTTP
// sink, in a transport around its own, before a connection is even taken
// from the pool, and again on the connection right before the first byte
// is written). A request refused at its write has written nothing, and
// its connection (over HTTPS the TLS connection: the sink dials TLS itself
// so that the gate sits above it) is kept for the next request, for up to
// two seconds, instead of closed: a loaded replica that refuses many late
// requests opens no new connection to the provider for them. LogSafe
// renders an error for a log line without the provider's answer body.
//
// HTTP is the production sink; see Send for the request it makes: the
// configuration (HTTPConfig: method, URL, body encoding json, form or raw,
// headers, basic or bearer auth with the secret from a file or the
// environment) shapes it, and a job's own request parts (queue.Request:
// method, URL, path, query, headers) may change it within the bounds the
// configuration sets (Bounds). Producers check the same bounds at enqueue
// (producer.WithJobCheck(b.Check)). Log is a sink for trying sluice out
// without a provider.
package sink
