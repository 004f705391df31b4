package main

import (
	"context"
	"fmt"
)

// setTenantRate is set-rate --tenant: it overrides one tenant's rate for
// every replica with tenant limits on, or clears it (every tenant's when
// tenant is empty).
func setTenantRate(ctx context.Context, g *globals, tenant string, rate float64, clear bool) error {
	return g.admin(ctx, false, func(ctx context.Context, a *adminParts) error {
		ctl := a.controls
		if clear {
			err := ctl.ClearTenantRate(ctx, tenant)
			g.audit("set tenant rate", "clear "+tenant, err)
			if err != nil {
				return err
			}
			who := "tenant " + tenant
			if tenant == "" {
				who = "every tenant"
			}
			fmt.Fprintf(g.stdout, "tenant override cleared for %s: back to pacer.tenants\n", who)
			return nil
		}
		err := ctl.SetTenantRate(ctx, tenant, rate)
		g.audit("set tenant rate", fmt.Sprintf("%s %g/s", tenant, rate), err)
		if err != nil {
			return err
		}
		note := ""
		if !a.cfg.Pacer.Tenants.On() {
			note = " (pacer.tenants sets no limit here: replicas with no tenant limits configured ignore it)"
		}
		fmt.Fprintf(g.stdout, "tenant %s limited to %g/s on every replica%s\n", tenant, rate, note)
		return nil
	})
}
