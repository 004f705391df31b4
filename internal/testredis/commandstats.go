package testredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CommandStat is one command's line of INFO commandstats: how many times
// Redis ran it and the microseconds it spent, since the stats were last
// reset (CONFIG RESETSTAT). Commands run inside scripts count under their
// own names as well as under the script's EVALSHA.
type CommandStat struct {
	Calls int64
	Usec  float64
}

// CommandStats reads INFO commandstats from rdb, by command name in lower
// case ("evalsha", "xadd").
func CommandStats(ctx context.Context, rdb *redis.Client) (map[string]CommandStat, error) {
	txt, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("testredis: commandstats: %w", err)
	}
	out := map[string]CommandStat{}
	for line := range strings.SplitSeq(txt, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var st CommandStat
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.Calls, err = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("testredis: commandstats: %q: %w", line, err)
			}
		}
		out[name] = st
	}
	return out, nil
}
