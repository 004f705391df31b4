package priority

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/queue"
)

func TestSetDefaults(t *testing.T) {
	c := Config{Lanes: []Lane{{Name: "vip", Weight: 8}, {Name: "default"}}}
	c.SetDefaults()
	if c.Policy != Strict {
		t.Errorf("policy: got %q, want %q", c.Policy, Strict)
	}
	if got := c.Lanes[0].Weight; got != 8 {
		t.Errorf("lanes[0].weight: got %d, want 8", got)
	}
	if got := c.Lanes[1].Weight; got != 1 {
		t.Errorf("lanes[1].weight: got %d, want 1", got)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after SetDefaults: got %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // each must appear in the error; none means valid
	}{
		{
			name: "valid strict",
			cfg:  Config{Lanes: []Lane{{"vip", 8}, {"default", 2}}, Policy: Strict, PrivilegedUsers: []string{"alice"}},
		},
		{
			name: "valid weighted one lane",
			cfg:  Config{Lanes: []Lane{{"default", 1}}, Policy: Weighted},
		},
		{
			name: "no lanes",
			cfg:  Config{Policy: Strict},
			want: []string{"queue.lanes: at least one lane is required"},
		},
		{
			name: "zero weight",
			cfg:  Config{Lanes: []Lane{{"vip", 3}, {"default", 0}}, Policy: Weighted},
			want: []string{"queue.lanes[1].weight: must be >= 1, got 0"},
		},
		{
			name: "huge weight",
			cfg:  Config{Lanes: []Lane{{"vip", MaxWeight + 1}}, Policy: Weighted},
			want: []string{"queue.lanes[0].weight: must be <= 1000000, got 1000001"},
		},
		{
			name: "bad policy",
			cfg:  Config{Lanes: []Lane{{"vip", 1}}, Policy: "fair"},
			want: []string{`queue.policy: must be strict or weighted, got "fair"`},
		},
		{
			name: "empty policy",
			cfg:  Config{Lanes: []Lane{{"vip", 1}}},
			want: []string{`queue.policy: must be strict or weighted, got ""`},
		},
		{
			name: "every problem at once",
			cfg: Config{
				Lanes:           []Lane{{"vip", 1}, {"vip", -2}, {"bad name", 1}, {"", 1}},
				Policy:          "lifo",
				PrivilegedUsers: []string{"alice", ""},
			},
			want: []string{
				`queue.lanes[1].name: duplicate lane "vip"`,
				"queue.lanes[1].weight: must be >= 1, got -2",
				`queue.lanes[2].name: must be 1-64 letters, digits, '_' or '-', got "bad name"`,
				`queue.lanes[3].name: must be 1-64 letters, digits, '_' or '-', got ""`,
				`queue.policy: must be strict or weighted, got "lifo"`,
				"queue.privileged_users[1]: must not be empty",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error with %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(err, ErrInvalidConfig): got false, want true (err %v)", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if got, want := strings.Count(err.Error(), "\n")+1, len(tt.want); got != want {
				t.Errorf("problems reported: got %d, want %d (%q)", got, want, err)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	c := Config{
		Lanes:           []Lane{{Name: "vip"}, {Name: "normal"}, {Name: "bulk"}},
		PrivilegedUsers: []string{"alice", "bob"},
	}
	tests := []struct {
		name string
		job  queue.Job
		want string
	}{
		{"own lane kept", queue.Job{Lane: "normal", User: "carol"}, "normal"},
		{"own lane beats privilege", queue.Job{Lane: "bulk", User: "alice"}, "bulk"},
		{"privileged user", queue.Job{User: "bob"}, "vip"},
		{"ordinary user", queue.Job{User: "carol"}, "bulk"},
		{"no user", queue.Job{}, "bulk"},
		{"user names are case sensitive", queue.Job{User: "Alice"}, "bulk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := tt.job
			if got := c.Route(&j); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if j.Lane != tt.job.Lane || j.User != tt.job.User {
				t.Errorf("Route changed the job: got %+v, want %+v", j, tt.job)
			}
		})
	}
}

func TestRouteNoLanes(t *testing.T) {
	var c Config
	if got := c.Route(&queue.Job{User: "alice"}); got != "" {
		t.Errorf("got %q, want empty", got)
	}
}

func TestRouteUnprivilegedEmptyUser(t *testing.T) {
	// An empty entry (refused by Validate) must not make every anonymous job privileged.
	c := Config{Lanes: []Lane{{Name: "vip"}, {Name: "default"}}, PrivilegedUsers: []string{""}}
	if got := c.Route(&queue.Job{}); got != "default" {
		t.Errorf("got %q, want %q", got, "default")
	}
}

func TestLaneNames(t *testing.T) {
	c := Config{Lanes: []Lane{{Name: "vip"}, {Name: "default"}}}
	got := c.LaneNames()
	if len(got) != 2 || got[0] != "vip" || got[1] != "default" {
		t.Errorf("got %q, want [vip default]", got)
	}
}
