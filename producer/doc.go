// Package producer puts jobs into a sluice queue, for applications written
// in Go and for the producer command.
//
// A Producer chooses each job's lane the way the configuration says
// (priority.Config.Route): the lane the job names, else the first lane for
// a privileged user, else the last lane, the lowest. The queue then
// validates and stores the job; its validation errors name the field that
// is wrong and match queue.ErrInvalidJob, and a batch with one bad job
// stores nothing.
//
// ParseJob reads one job in its JSON form, as the producer command reads
// it from a file of JSON lines:
//
//	{"id": "...", "lane": "vip", "user": "alice", "key": "idem-123",
//	 "not_before": "2026-11-21T10:00:00Z", "expires_at": "2026-11-21T10:05:00Z",
//	 "cost": 2, "request": {"path": "/v2/sms"}, "payload": {...}}
//
// Only payload is required. A typical application builds its jobs itself:
//
//	p, err := producer.New(q, cfg.PriorityConfig())
//	...
//	res, err := p.Enqueue(ctx, &queue.Job{User: "alice", Key: "otp-42",
//		Payload: json.RawMessage(`{"to":"+15550100","text":"123456"}`)})
package producer
