package pacer

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed tenant_admin.lua
	tenantAdminSrc    string
	tenantAdminScript = redis.NewScript(tenantAdminSrc)
)

// SetTenantRate overrides tenant's rate for every replica with tenant
// limits on (pacer.tenants), from each one's next Redis call, until
// ClearTenantRate. It may limit a tenant the configuration does not.
func (p *Controls) SetTenantRate(ctx context.Context, tenant string, rate float64) error {
	if tenant == "" {
		return fmt.Errorf("pacer: set tenant rate: %w: empty tenant", ErrInvalidConfig)
	}
	if err := CheckRate(rate); err != nil {
		return fmt.Errorf("pacer: set tenant rate: %w", err)
	}
	return p.tenantAdmin(ctx, "set tenant rate", "set", tenant, strconv.FormatFloat(rate, 'f', -1, 64))
}

// ClearTenantRate removes tenant's override; with no tenant, every
// tenant's. The replicas go back to the configured rates.
func (p *Controls) ClearTenantRate(ctx context.Context, tenant string) error {
	if tenant == "" {
		return p.tenantAdmin(ctx, "clear tenant rates", "clear")
	}
	return p.tenantAdmin(ctx, "clear tenant rate", "clear", tenant)
}

// TenantRates returns the operator's tenant overrides.
func (p *Controls) TenantRates(ctx context.Context) (map[string]float64, error) {
	v, err := tenantAdminScript.Run(ctx, p.rdb, []string{p.tenantRatesKey()}, "list").Result()
	if err != nil {
		return nil, fmt.Errorf("pacer: tenant rates: %w: %w", ErrUnavailable, err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr)%2 != 0 {
		return nil, fmt.Errorf("pacer: tenant rates: %w: got %T", ErrBadReply, v)
	}
	out := make(map[string]float64, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		name, ok1 := arr[i].(string)
		val, ok2 := arr[i+1].(string)
		r, err := strconv.ParseFloat(val, 64)
		if !ok1 || !ok2 || err != nil {
			return nil, fmt.Errorf("pacer: tenant rates: %w: %v = %v", ErrBadReply, arr[i], arr[i+1])
		}
		out[name] = r
	}
	return out, nil
}

func (p *Controls) tenantAdmin(ctx context.Context, op string, args ...any) error {
	if err := tenantAdminScript.Run(ctx, p.rdb, []string{p.tenantRatesKey()}, args...).Err(); err != nil {
		return fmt.Errorf("pacer: %s: %w: %w", op, ErrUnavailable, err)
	}
	return nil
}

// tenantRatesKey is the operator's tenant rates of the controls' schedule.
func (p *Controls) tenantRatesKey() string { return tenantRatesKey(p.name) }
