package pacer

// key is the Redis hash that holds the schedule named name. The hash tag
// keeps it in one Redis Cluster slot with the queue of the same name.
func key(name string) string { return "sluice:{" + name + "}:pacer" }

// gapsKey is the Redis sorted set of the schedule's gaps: grid points a
// grant with a stride passed over, left for later calls (reserve.lua).
func gapsKey(name string) string { return "sluice:{" + name + "}:gaps" }

// replicasKey is the Redis hash of the replicas drawing on the schedule.
func replicasKey(name string) string { return "sluice:{" + name + "}:replicas" }

// tenantsKey is the Redis hash of the tenants' schedules (tenant -> tat),
// beside the pacer hash in the same Cluster slot.
func tenantsKey(name string) string { return "sluice:{" + name + "}:tenants" }

// tenantRatesKey is the Redis hash of the operator's tenant rates (tenant
// -> rate), set with Controls.SetTenantRate.
func tenantRatesKey(name string) string { return "sluice:{" + name + "}:tenant_rates" }
