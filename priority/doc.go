// Package priority holds sluice's lanes, their order and weights, the policy
// that chooses which lane takes the next pacer slot, and the routing of
// privileged users' jobs to the first lane. It is pure logic: no I/O, no
// clock, no goroutines.
//
// Lanes are listed highest priority first. A job names its lane, or
// Config.Route picks one: the first lane for a privileged user, else the
// last, lowest lane.
//
// When a slot comes, the dispatch engine asks a Scheduler which lane takes
// it, telling it which lanes have a job ready:
//
//   - strict: the highest ready lane, always. A lower lane waits for as long
//     as a higher one is busy.
//   - weighted: smooth weighted round-robin over the ready lanes. With lanes
//     vip (weight 8) and default (weight 2) both busy, vip takes 8 slots out
//     of every 10 and default 2, interleaved; a lane with nothing ready is
//     skipped and banks no credit for it.
package priority
