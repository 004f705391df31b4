package redisq

// keys builds every Redis key of one queue. Each key carries the queue name
// as its hash tag, "sluice:{<name>}:...", so that a queue lives in one Redis
// Cluster slot and its scripts may touch all of its keys.
type keys struct {
	prefix string // "sluice:{<name>}:"
}

func newKeys(name string) keys { return keys{prefix: "sluice:{" + name + "}:"} }

// lane is the stream of a lane's ready and in-flight jobs.
func (k keys) lane(lane string) string { return k.prefix + "lane:" + lane }

// delayed is the sorted set of a lane's jobs due later, scored by due time
// in Unix ms.
func (k keys) delayed(lane string) string { return k.prefix + "delayed:" + lane }

// claimCursor holds where the next scan for timed-out deliveries of a lane
// starts.
func (k keys) claimCursor(lane string) string { return k.prefix + "claim-cursor:" + lane }

// claimRest exists while the scan for timed-out deliveries of a lane rests
// after a pass over its pending entries (fetch.lua). It is a key of its
// own, not a value of the cursor, so that a replica of an earlier version
// still reading the cursor during a rolling upgrade finds only entry ids
// there.
func (k keys) claimRest(lane string) string { return k.prefix + "claim-rest:" + lane }

// dead is the stream of dead letters, oldest first.
func (k keys) dead() string { return k.prefix + "dead" }

// deadIndex is the hash from job id to the id of its dead-letter entry.
func (k keys) deadIndex() string { return k.prefix + "dead-index" }

// dedup is the key that holds an idempotency key for the dedup window; its
// value is the id of the job first stored under it.
func (k keys) dedup(key string) string { return k.prefix + "dedup:" + key }

// lanes returns the streams of lanes, in order.
func (k keys) lanes(lanes []string) []string {
	out := make([]string, len(lanes))
	for i, l := range lanes {
		out[i] = k.lane(l)
	}
	return out
}

// delayedSets returns the due-later sets of lanes, in order.
func (k keys) delayedSets(lanes []string) []string {
	out := make([]string, len(lanes))
	for i, l := range lanes {
		out[i] = k.delayed(l)
	}
	return out
}
