// Package console is the operator's console: a web page served by a
// replica's admin listener (metrics.listen) that shows the cluster's
// achieved rate against the cap and the effective rate, each lane's
// backlog, the live replicas, the pacer's state and the dead letters, and
// that pauses, resumes, sets the rate, requeues, deletes and purges.
//
// The page is self-contained: its HTML, CSS and JavaScript are embedded
// (no CDN, no build step), and its chart is a hand-written SVG.
//
// Every request must name an IP address, localhost or one of
// Options.AllowedHosts in its Host, so that a web page cannot read the
// console through DNS rebinding. Beyond that, reads (GET /console/api/...)
// need nothing more than /metrics does.
// Actions (POST) and payloads need the token of admin.token_file, sent as
// "Authorization: Bearer TOKEN", and pass net/http's CrossOriginProtection
// (Sec-Fetch-Site and Origin). Each action is logged as "sluice: audit".
//
// The same Snapshot feeds the page and `dispatcher status --json`, so the
// CLI can show everything the page shows.
//
// The achieved rate per lane comes from the replicas' heartbeats: each
// replica announces, every 2 s, its cumulative count of requests sent per
// lane (Report); a console differentiates each live replica's counts
// between two of its reports and sums the replicas (History). That costs
// no Redis call beyond the heartbeat the replica makes anyway.
package console
