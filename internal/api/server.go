package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// Enqueuer routes, checks and stores jobs: a *producer.Producer, built
// with the queue's limits and the sink's bounds (producer.WithJobCheck).
type Enqueuer interface {
	Check(job *queue.Job) error
	Enqueue(ctx context.Context, job *queue.Job) (queue.EnqueueResult, error)
	EnqueueBatch(ctx context.Context, jobs []*queue.Job) ([]queue.EnqueueResult, error)
}

var _ Enqueuer = (*producer.Producer)(nil)

// Options are what a Server serves.
type Options struct {
	// Queue is the queue's name: the {queue} of every path. Required.
	Queue string
	// Backend is the queue's backend, shown in the status.
	Backend string
	// Producer enqueues. Required.
	Producer Enqueuer
	// Inspector reads the queue's figures. Required.
	Inspector queue.Inspector
	// Locator and Canceler find and cancel jobs. Nil: those requests are
	// answered 501.
	Locator  queue.Locator
	Canceler queue.Canceler
	// Rate reads the pacer's rate and the live replicas for the status.
	// Nil: the status has no rate.
	Rate func(ctx context.Context) (*RateStatus, error)
	// Token is the bearer token every request must carry. Required.
	Token string
	// MaxBodyBytes bounds a request body. Zero means 1 MiB.
	MaxBodyBytes int64
	// MaxBatch bounds the jobs of a batch. Zero means 1000.
	MaxBatch int
	// Timeout bounds the work of one request with the backend. Zero means 10s.
	Timeout time.Duration
	// Log receives one line per failed backend call. Nil means slog.Default().
	Log *slog.Logger
}

// Server is the ingest API's handler. It is safe for concurrent use.
type Server struct {
	opts    Options
	handler http.Handler
}

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	var errs []error
	if opts.Queue == "" {
		errs = append(errs, errors.New("api: new: queue name required"))
	}
	if opts.Producer == nil || opts.Inspector == nil {
		errs = append(errs, errors.New("api: new: producer and inspector required"))
	}
	if len(opts.Token) < MinTokenBytes {
		errs = append(errs, fmt.Errorf("api: new: token must be at least %d bytes", MinTokenBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &Server{opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/queues/{queue}/jobs", s.queueScoped(s.enqueue))
	mux.HandleFunc("GET /v1/queues/{queue}/jobs/{id}", s.queueScoped(s.locate))
	mux.HandleFunc("DELETE /v1/queues/{queue}/jobs/{id}", s.queueScoped(s.cancel))
	mux.HandleFunc("GET /v1/queues/{queue}", s.queueScoped(s.status))
	for _, p := range []string{"/v1/queues/{queue}/jobs", "/v1/queues/{queue}/jobs/{id}", "/v1/queues/{queue}"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint", Problem{Field: "path", Reason: fmt.Sprintf("%s is not an endpoint of the API (see docs/openapi.yaml)", r.URL.Path)})
	})
	s.handler = s.authorize(mux)
	return s, nil
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// authorize answers 401 to a request without the token.
func (s *Server) authorize(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			reason := "missing: send Authorization: Bearer <token>"
			if len(got) > 0 {
				reason = "wrong token"
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", Problem{Field: "Authorization", Reason: reason})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// queueScoped answers 404 for a queue other than the server's.
func (s *Server) queueScoped(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if q := r.PathValue("queue"); q != s.opts.Queue {
			writeError(w, http.StatusNotFound, "unknown queue", Problem{Field: "queue", Reason: fmt.Sprintf("%q is not served here (this server serves %q)", q, s.opts.Queue)})
			return
		}
		h(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusMethodNotAllowed, "method not allowed", Problem{Field: "method", Reason: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)})
}

// Serve serves the API on ln until ctx ends, then shuts down, letting
// requests in flight finish for up to 10 seconds. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return nil
}
