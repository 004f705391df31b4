package priority_test

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
)

func ExampleScheduler_Next() {
	s, err := priority.NewScheduler(priority.Config{
		Lanes:  []priority.Lane{{Name: "vip", Weight: 3}, {Name: "default", Weight: 1}},
		Policy: priority.Weighted,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	lanes := []string{"vip", "default"}
	both := []bool{true, true}
	var chosen []string
	for range 8 {
		i, _ := s.Next(both)
		chosen = append(chosen, lanes[i])
	}
	fmt.Println(strings.Join(chosen, " "))
	// Only the default lane has a job: it gets every slot.
	i, _ := s.Next([]bool{false, true})
	fmt.Println(lanes[i])
	// Nothing ready: no lane takes the slot.
	_, ok := s.Next([]bool{false, false})
	fmt.Println(ok)
	// Output:
	// vip vip default vip vip vip default vip
	// default
	// false
}

func ExampleConfig_Route() {
	cfg := priority.Config{
		Lanes:           []priority.Lane{{Name: "vip"}, {Name: "default"}},
		PrivilegedUsers: []string{"alice"},
	}
	fmt.Println(cfg.Route(&queue.Job{User: "alice"}))
	fmt.Println(cfg.Route(&queue.Job{User: "bob"}))
	fmt.Println(cfg.Route(&queue.Job{User: "bob", Lane: "vip"}))
	// Output:
	// vip
	// default
	// vip
}
