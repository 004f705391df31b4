// Package e2e holds sluice's end-to-end tests: they build the binaries,
// start a real redis-server, a NATS server, a recording HTTP provider and
// several dispatcher processes, and check what the provider sees.
package e2e
