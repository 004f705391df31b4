package redisq

import (
	"errors"
	"strings"
	"testing"
)

func TestReplyRefusesBadShapes(t *testing.T) {
	cases := []struct {
		name         string
		v            any
		head, stride int
		read         func(r *reply)
	}{
		{"not an array", "OK", 0, 2, func(r *reply) { r.int(0) }},
		{"odd length", []any{int64(1), "a", int64(0)}, 0, 2, func(r *reply) { r.int(0) }},
		{"string for int", []any{"x", "a"}, 0, 2, func(r *reply) { r.int(0) }},
		{"int for string", []any{int64(0), int64(7)}, 0, 2, func(r *reply) { r.str(1) }},
		{"nil value", []any{nil, "a"}, 0, 2, func(r *reply) { r.int(0) }},
		{"too short for head", []any{}, 1, 4, func(r *reply) { r.int(0) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newReply(c.v, c.head, c.stride)
			c.read(r) // must not panic
			if !errors.Is(r.err, errReply) {
				t.Errorf("got %v, want errReply", r.err)
			}
		})
	}
	r := newReply([]any{int64(1), "id", "42", "x"}, 0, 2)
	if r.int(0) != 1 || r.str(1) != "id" || r.int(2) != 42 || r.str(3) != "x" || r.err != nil {
		t.Errorf("good reply: got err %v", r.err)
	}
	for _, v := range []any{"1", int64(2), nil} {
		if _, err := settled(v); !errors.Is(err, errReply) {
			t.Errorf("settled(%v): got %v, want errReply", v, err)
		}
	}
}

func TestKeysShareOneHashTag(t *testing.T) {
	k := newKeys("sms")
	all := []string{k.lane("vip"), k.delayed("vip"), k.claimCursor("vip"), k.claimRest("vip"), k.dead(), k.deadIndex(), k.dedup("a{b}c")}
	for _, key := range all {
		if !strings.HasPrefix(key, "sluice:{sms}:") {
			t.Errorf("key %q: want the prefix sluice:{sms}:", key)
		}
	}
	if k.lane("a") == k.delayed("a") || k.lane("a") == k.lane("b") {
		t.Errorf("keys collide: %v", all)
	}
}
