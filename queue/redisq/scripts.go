package redisq

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one file each, with their KEYS/ARGV contract at the top.
var (
	//go:embed enqueue.lua
	enqueueLua string
	//go:embed fetch.lua
	fetchLua string
	//go:embed ack.lua
	ackLua string
	//go:embed retry.lua
	retryLua string
	//go:embed deadletter.lua
	deadLetterLua string
	//go:embed extend.lua
	extendLua string
	//go:embed requeue.lua
	requeueLua string
	//go:embed stats.lua
	statsLua string
	//go:embed forget.lua
	forgetLua string
	//go:embed ackbatch.lua
	ackBatchLua string
	//go:embed release.lua
	releaseLua string
	//go:embed sweep.lua
	sweepLua string
)

// scripts holds each script wrapped once; Run uses EVALSHA and falls back to
// EVAL when the server does not know the script (after a restart, say).
type scripts struct {
	enqueue, fetch, ack, retry, deadLetter, extend, requeue, stats, forget, ackBatch, release, sweep *redis.Script
}

func newScripts() *scripts {
	return &scripts{
		enqueue:    redis.NewScript(enqueueLua),
		fetch:      redis.NewScript(fetchLua),
		ack:        redis.NewScript(ackLua),
		retry:      redis.NewScript(retryLua),
		deadLetter: redis.NewScript(deadLetterLua),
		extend:     redis.NewScript(extendLua),
		requeue:    redis.NewScript(requeueLua),
		stats:      redis.NewScript(statsLua),
		forget:     redis.NewScript(forgetLua),
		ackBatch:   redis.NewScript(ackBatchLua),
		release:    redis.NewScript(releaseLua),
		sweep:      redis.NewScript(sweepLua),
	}
}
