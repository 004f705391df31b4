package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
)

//go:embed assets
var assets embed.FS

// Queue is what the console needs of a queue: its counts and its dead
// letters. Its dead letters can be deleted when it is also a DeadDeleter,
// or a queue.Locator and a queue.Canceler (Deletes).
type Queue interface {
	queue.Inspector
	queue.DeadLetters
}

// Options configure a Console.
type Options struct {
	Queue    string // queue.name, shown on the page
	Backend  string // queue.backend
	Q        Queue
	Controls *pacer.Controls
	Members  *pacer.Members
	// History gives the achieved rates; nil shows none.
	History *History
	// Token is admin.token_file's token. Zero means the console is
	// read-only: actions and payloads are refused.
	Token string
	// Log receives the audit records ("sluice: audit"). Zero discards.
	Log *slog.Logger
	// Now is the clock for expiry checks. Zero means time.Now.
	Now func() time.Time
	// AllowedHosts are the host names, besides IP addresses, localhost and
	// names under .localhost, that a request's Host may carry (a name the
	// operator reaches the console by, say through a reverse proxy that
	// passes it). Zero allows none: every other name is refused with 421,
	// whatever address the listener has, against DNS rebinding.
	AllowedHosts []string
}

// Console serves the operator's console under /console/.
type Console struct {
	o   Options
	cop *http.CrossOriginProtection
}

// New returns a console on o.
func New(o Options) (*Console, error) {
	if o.Q == nil || o.Controls == nil || o.Members == nil {
		return nil, errors.New("console: queue, controls and members are required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for _, h := range o.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/[]") {
			return nil, fmt.Errorf("console: allowed host %q: give a host name, without a port", h)
		}
	}
	return &Console{o: o, cop: http.NewCrossOriginProtection()}, nil
}

// Handler serves the page at /console/ and its API at /console/api/.
// Mount it on a mux at "/console/". It answers only requests whose Host is
// an IP address, localhost or one of Options.AllowedHosts (421 otherwise).
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets") // cannot fail: the directory is embedded
	mux.Handle("GET /console/", http.StripPrefix("/console/", noStore(http.FileServerFS(static))))
	mux.HandleFunc("GET /console/api/state", c.state)
	mux.HandleFunc("GET /console/api/dlq", c.listDead)
	mux.Handle("GET /console/api/dlq/{id}", c.guard("show payload", c.showDead))
	mux.Handle("POST /console/api/pause", c.guard("pause", c.pause(true)))
	mux.Handle("POST /console/api/resume", c.guard("resume", c.pause(false)))
	mux.Handle("POST /console/api/rate", c.guard("set rate", c.setRate))
	mux.Handle("POST /console/api/dlq/requeue", c.guard("requeue", c.requeue))
	mux.Handle("POST /console/api/dlq/delete", c.guard("delete", c.deleteDead))
	mux.Handle("POST /console/api/dlq/purge", c.guard("purge", c.purge))
	return hostGuard(c.o.AllowedHosts, mux)
}

// action is one guarded request's work: what it did, for the audit
// record, or an error.
type action func(w http.ResponseWriter, r *http.Request) (string, error)

// guard lets an action run only from the same origin, with the token and
// (for a POST) a JSON body, and writes the audit record of every attempt,
// refused ones included.
func (c *Console) guard(name string, h action) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.cop.Check(r); err != nil {
			c.audit(r, name, "", "refused: cross-origin request")
			writeErr(w, http.StatusForbidden, "cross-origin request refused: "+err.Error())
			return
		}
		if c.o.Token == "" {
			c.audit(r, name, "", "refused: no admin.token_file")
			writeErr(w, http.StatusForbidden, "actions are off: set admin.token_file on this replica")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(c.o.Token)) != 1 {
			c.audit(r, name, "", "refused: wrong or missing token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			writeErr(w, http.StatusUnauthorized, "the token is missing or wrong")
			return
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			c.audit(r, name, "", "refused: body not application/json")
			writeErr(w, http.StatusUnsupportedMediaType, "send application/json")
			return
		}
		detail, err := h(w, r)
		if err != nil {
			c.audit(r, name, detail, "failed: "+err.Error())
			status := http.StatusBadGateway
			switch {
			case errors.Is(err, errBadRequest):
				status = http.StatusBadRequest
			case errors.Is(err, ErrNotSupported):
				status = http.StatusNotImplemented
			case errors.Is(err, queue.ErrNotFound):
				status = http.StatusNotFound
			}
			writeErr(w, status, err.Error())
			return
		}
		c.audit(r, name, detail, "done") // payload views too: they show user data
	})
}

var errBadRequest = errors.New("bad request")

func (c *Console) audit(r *http.Request, act, detail, result string) {
	lvl := slog.LevelInfo
	if result != "done" {
		lvl = slog.LevelWarn
	}
	c.o.Log.Log(r.Context(), lvl, "sluice: audit", "via", "console", "action", act, "detail", detail,
		"result", result, "remote", r.RemoteAddr, "queue", c.o.Queue)
}

func (c *Console) sources() Sources {
	return Sources{Queue: c.o.Queue, Backend: c.o.Backend, Stats: c.o.Q, Controls: c.o.Controls, Members: c.o.Members,
		History: c.o.History}
}

// stateView is the page's state: the snapshot and what the page may do.
type stateView struct {
	Snapshot
	Actions       bool `json:"actions"`        // a token is configured
	DeleteEnabled bool `json:"delete_enabled"` // the backend deletes dead letters (Deletes)
}

func (c *Console) state(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, stateView{Snapshot: Collect(r.Context(), c.sources()), Actions: c.o.Token != "", DeleteEnabled: Deletes(c.o.Q)})
}

func (c *Console) listDead(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			writeErr(w, http.StatusBadRequest, "limit must be from 1 to 10000")
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	dead, err := c.o.Q.ListDead(ctx, limit)
	if err != nil {
		writeErr(w, http.StatusBadGateway, err.Error())
		return
	}
	now := c.o.Now()
	out := make([]DeadLetter, 0, len(dead))
	for _, d := range dead {
		out = append(out, ViewDead(d, now, false))
	}
	writeJSON(w, out)
}

func (c *Console) showDead(w http.ResponseWriter, r *http.Request) (string, error) {
	id := r.PathValue("id")
	d, err := FindDead(r.Context(), c.o.Q, id)
	if err != nil {
		return id, err
	}
	writeJSON(w, ViewDead(d, c.o.Now(), true))
	return id, nil
}

func (c *Console) pause(on bool) action {
	return func(w http.ResponseWriter, r *http.Request) (string, error) {
		var err error
		if on {
			err = c.o.Controls.Pause(r.Context())
		} else {
			err = c.o.Controls.Resume(r.Context())
		}
		if err != nil {
			return "", err
		}
		writeJSON(w, map[string]bool{"paused": on})
		return "", nil
	}
}

// rateRequest is the body of POST /console/api/rate.
type rateRequest struct {
	Rate  float64 `json:"rate"`
	Clear bool    `json:"clear"`
}

func (c *Console) setRate(w http.ResponseWriter, r *http.Request) (string, error) {
	var req rateRequest
	if err := readJSON(r, &req); err != nil {
		return "", err
	}
	if req.Clear {
		if err := c.o.Controls.ClearOverrides(r.Context()); err != nil {
			return "clear", err
		}
		writeJSON(w, map[string]any{"rate_override": 0})
		return "clear", nil
	}
	detail := strconv.FormatFloat(req.Rate, 'f', -1, 64) + "/s"
	if err := c.o.Controls.SetRate(r.Context(), req.Rate); err != nil {
		if errors.Is(err, pacer.ErrInvalidConfig) {
			err = fmt.Errorf("%w: %w", errBadRequest, err)
		}
		return detail, err
	}
	writeJSON(w, map[string]any{"rate_override": req.Rate})
	return detail, nil
}

// idsRequest is the body of the dead-letter actions: ids, or all.
type idsRequest struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

func (req idsRequest) check() error {
	if req.All == (len(req.IDs) > 0) {
		return fmt.Errorf("%w: give ids, or all alone", errBadRequest)
	}
	return nil
}

func (req idsRequest) detail() string {
	if req.All {
		return "all"
	}
	return strings.Join(req.IDs, ",")
}

func (c *Console) requeue(w http.ResponseWriter, r *http.Request) (string, error) {
	var req idsRequest
	if err := readJSON(r, &req); err != nil {
		return "", err
	}
	if err := req.check(); err != nil {
		return "", err
	}
	res, err := Requeue(r.Context(), c.o.Q, c.o.Now(), req.IDs)
	if err != nil {
		return fmt.Sprintf("%s: requeued %d", req.detail(), res.Requeued), fmt.Errorf("requeued %d, then: %w", res.Requeued, err)
	}
	writeJSON(w, res)
	return fmt.Sprintf("%s: requeued %d, expired left %d", req.detail(), res.Requeued, len(res.SkippedExpired)), nil
}

func (c *Console) deleteDead(w http.ResponseWriter, r *http.Request) (string, error) {
	var req idsRequest
	if err := readJSON(r, &req); err != nil {
		return "", err
	}
	if err := req.check(); err != nil {
		return "", err
	}
	n, err := DeleteDead(r.Context(), c.o.Q, req.IDs)
	detail := fmt.Sprintf("%s: deleted %d", req.detail(), n)
	if err != nil {
		return detail, fmt.Errorf("deleted %d, then: %w", n, err)
	}
	writeJSON(w, map[string]int{"deleted": n})
	return detail, nil
}

func (c *Console) purge(w http.ResponseWriter, r *http.Request) (string, error) {
	n, err := DeleteDead(r.Context(), c.o.Q, nil)
	detail := fmt.Sprintf("deleted %d", n)
	if err != nil {
		return detail, fmt.Errorf("deleted %d, then: %w", n, err)
	}
	writeJSON(w, map[string]int{"deleted": n})
	return detail, nil
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", errBadRequest, err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v) // the client went away
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// hostGuard refuses every request whose Host is not an IP address,
// localhost (or a name under .localhost) or one of allowed, whatever
// address the listener has. A web page cannot then read the console
// through DNS rebinding: the page's requests carry its own name in Host,
// a name its author controls and has pointed at the console's address.
// That holds behind a port published by Docker as well, where the
// listener is not loopback but the operator's browser reaches it through
// 127.0.0.1.
func hostGuard(allowed []string, h http.Handler) http.Handler {
	names := map[string]bool{}
	for _, n := range allowed {
		names[canonicalHost(n)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, names) {
			writeErr(w, http.StatusMisdirectedRequest,
				"this console answers only to an IP address, localhost or a name in admin.allowed_hosts in Host: open it by address, or list the name there")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a request's Host (with or without a port)
// is an IP address, localhost, a name under .localhost, or in names.
func hostAllowed(hostport string, names map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = canonicalHost(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || names[host]
}

// canonicalHost is a host name as compared: lower case, no final dot.
func canonicalHost(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}
