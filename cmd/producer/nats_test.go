package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

func TestNATSBackend(t *testing.T) {
	srv := testnats.Start(t)
	cfg := writeFile(t, "sluice.yaml", fmt.Sprintf(testConfig, "nats"))
	// redis.url points where nothing listens: backend nats needs no Redis.
	args := []string{"--config", cfg, "--nats-url", srv.URL(), "--redis-url", "redis://127.0.0.1:1/0"}

	r := runCmd(t, "", append(args, "--user", "alice", "--key", "n1", "--payload", `{"text":"hi"}`)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !idRE.MatchString(id) {
		t.Fatalf("one job: got exit %d, %q, %q; want exit 0 and an id", r.code, r.stdout, r.stderr)
	}
	stdin := `{"user": "alice", "key": "n1", "payload": {"text": "hi"}}
{"user": "bob", "payload": 2}
{"lane": "nope", "payload": 3}
{"lane": "vip", "payload": 4}
`
	r = runCmd(t, stdin, append(args, "--file", "-")...)
	if r.code != 1 || r.stdout != "enqueued 2, duplicates 1, refused 1\n" || !strings.Contains(r.stderr, `line 3: lane: unknown lane "nope"`) {
		t.Errorf("file: got exit %d, %q, %q; want exit 1, 2 enqueued, 1 duplicate, line 3 refused", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, "", append(args, "--gen", "10", "--mix", "privileged=0.2")...)
	if r.code != 0 || !strings.Contains(r.stdout, "(vip 2, default 8)") {
		t.Errorf("gen: got exit %d, %q, %q; want 10 enqueued, 2 in vip", r.code, r.stdout, r.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	q, err := natsq.New(ctx, js, queue.Config{Name: "sms", Lanes: []string{"vip", "default"}, MaxPayloadBytes: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got, want := lanes(t, q), "vip=4 default=9"; got != want {
		t.Errorf("got lanes %s, want %s", got, want)
	}
	if j := fetchOne(t, q, "vip"); j.ID != id || j.Key != "n1" {
		t.Errorf("got first vip job %+v, want the one job %s", j, id)
	}
}
