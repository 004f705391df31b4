package pacer

// key is the Redis hash that holds the schedule named name. The hash tag
// keeps it in one Redis Cluster slot with the queue of the same name.
func key(name string) string { return "sluice:{" + name + "}:pacer" }

// replicasKey is the Redis hash of the replicas drawing on the schedule.
func replicasKey(name string) string { return "sluice:{" + name + "}:replicas" }
