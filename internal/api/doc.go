// Package api is sluice's HTTP ingest API, for producers in any language:
// enqueue one job or a batch, find where a job is, cancel a waiting,
// delayed or dead job, and read the queue's figures. `dispatcher serve-api`
// runs it; docs/openapi.yaml describes it, and a test checks the server
// against that document.
//
//	POST   /v1/queues/{queue}/jobs        one job (the job JSON), or {"jobs": [...]}
//	GET    /v1/queues/{queue}/jobs/{id}   where the job is: waiting, delayed, in_flight, dead, unknown
//	DELETE /v1/queues/{queue}/jobs/{id}   cancel a waiting, delayed or dead job
//	GET    /v1/queues/{queue}             lanes, dead letters, rate, replicas
//
// Every request carries Authorization: Bearer <token> (api.token_file).
// Bodies are bounded (api.max_body_bytes, 413 past it) and so are batches
// (api.max_batch). Every error is JSON naming the field:
//
//	{"error": {"status": 400, "message": "...", "fields": [{"field": "jobs[1].cost", "reason": "..."}]}}
//
// A batch is validated whole before anything is stored (the queue's
// checks and the sink's bounds on each job's own request): one bad job,
// and nothing of the batch is stored.
package api
