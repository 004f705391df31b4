package sink

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/queue"
)

// Log is a sink for trying sluice out: it logs each job, without its
// payload, and reports it delivered. It is safe for concurrent use.
type Log struct {
	log *slog.Logger
}

var _ Sender = (*Log)(nil)

// NewLog returns a Log sink writing to logger; a nil logger means
// slog.Default().
func NewLog(logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.Default()
	}
	return &Log{log: logger}
}

// Send logs the job's id, lane, attempt and payload size at level Info and
// returns nil, or a transient error when ctx has already ended. The hold
// and the gate ctx may carry (Hold) run just before the record is written:
// when either refuses, nothing is logged and Send returns its error.
func (s *Log) Send(ctx context.Context, j *queue.Job) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: log: %w", ErrTransient, err)
	}
	if j == nil {
		return fmt.Errorf("%w: nil job", ErrPermanent)
	}
	if err := Hold(ctx); err != nil {
		return fmt.Errorf("sink: log: not sent: %w", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "sink: job delivered to the log",
		slog.String("job_id", j.ID),
		slog.String("lane", j.Lane),
		slog.Int("attempt", j.Attempt),
		slog.Int("payload_bytes", len(j.Payload)),
	)
	return nil
}

// Holds reports true: Send runs Hold right before it writes the record.
func (s *Log) Holds() bool { return true }
