package pacer

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reserve.lua
	reserveSrc    string
	reserveScript = redis.NewScript(reserveSrc)

	//go:embed throttle.lua
	throttleSrc    string
	throttleScript = redis.NewScript(throttleSrc)

	//go:embed admin.lua
	adminSrc    string
	adminScript = redis.NewScript(adminSrc)

	//go:embed adapt.lua
	adaptSrc    string
	adaptScript = redis.NewScript(adaptSrc)

	//go:embed state.lua
	stateSrc    string
	stateScript = redis.NewScript(stateSrc)
)

// strings checks that a script reply is an array of n strings.
func replyStrings(v any, n int) ([]string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, fmt.Errorf("%w: want %d strings, got %T %v", ErrBadReply, n, v, v)
	}
	out := make([]string, n)
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: element %d is %T, want string", ErrBadReply, i, x)
		}
		out[i] = s
	}
	return out, nil
}

// micros parses a decimal count of microseconds; "" parses as 0.
func micros(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a number", ErrBadReply, s)
	}
	return f, nil
}

// parseFields parses every field with micros, stopping at the first error.
func parseFields(fields []string) ([]float64, error) {
	out := make([]float64, len(fields))
	for i, s := range fields {
		f, err := micros(s)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// usTime turns microseconds since the epoch into a time.
func usTime(us float64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	whole := math.Floor(us)
	return time.UnixMicro(int64(whole)).Add(time.Duration((us - whole) * float64(time.Microsecond)))
}

// usDur turns microseconds into a duration.
func usDur(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }
