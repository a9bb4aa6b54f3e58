package producer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Defaults of SequencerOptions.
const (
	// DefaultSequenceBatch is the most events one Sequence call numbers.
	DefaultSequenceBatch = 1000
	// DefaultSequencePoll is how long an idle Sequencer waits before it looks again, when nothing
	// woke it: the longest an event committed by a process that does not call Wake waits to be
	// numbered.
	DefaultSequencePoll = 100 * time.Millisecond
)

// maxSequenceBackoff bounds the pause after failed Sequence calls.
const maxSequenceBackoff = 5 * time.Second

// SequencerOptions configures a Sequencer. A nil *SequencerOptions and the zero value mean the
// defaults.
type SequencerOptions struct {
	// Batch is the most events one Sequence call numbers; 0 means DefaultSequenceBatch.
	Batch int
	// PollInterval is how long an idle Sequencer waits before looking again; 0 means
	// DefaultSequencePoll. A Sequencer that numbered something looks again at once, so under load it
	// runs back to back and the poll only bounds the wait of an event nobody woke it for.
	PollInterval time.Duration
	// Logger records failed Sequence calls; nil means no logging.
	Logger *slog.Logger
	// OnSequenced, when set, receives the runs of every call that numbered events, on Run's
	// goroutine, after they are committed. It must not block for long.
	OnSequenced func(runs []driver.SequencedRun)
}

// Sequencer numbers the events of a Sequencing log in the background: Run calls Sequence at once when
// woken (Wake, after a commit) and after each call that numbered something, otherwise every
// PollInterval; a failed call is logged and retried after a growing pause. Any number of Sequencers
// may run on one log, in one process or across replicas: the log's locks keep them from numbering
// the same events, and one that dies mid-call leaves no trace (the call's transaction rolls back).
//
// A Sequencer is safe for concurrent use. The zero value is not usable: its Run and Drain return an
// error that wraps ErrNotBuilt, and its Wake has nothing to wake. Build one with NewSequencer.
type Sequencer struct {
	log         driver.Sequencing
	batch       int
	poll        time.Duration
	logger      *slog.Logger
	onSequenced func([]driver.SequencedRun)
	wake        chan struct{}
}

// NewSequencer returns a Sequencer for log. It fails when an option is negative.
func NewSequencer(log driver.Sequencing, opts *SequencerOptions) (*Sequencer, error) {
	if log == nil {
		return nil, errors.New("producer: NewSequencer needs a Sequencing log")
	}
	var o SequencerOptions
	if opts != nil {
		o = *opts
	}
	if o.Batch < 0 || o.PollInterval < 0 {
		return nil, errors.New("producer: negative sequencer option")
	}
	s := &Sequencer{log: log, batch: o.Batch, poll: o.PollInterval, logger: o.Logger, onSequenced: o.OnSequenced,
		wake: make(chan struct{}, 1)}
	if s.batch == 0 {
		s.batch = DefaultSequenceBatch
	}
	if s.poll == 0 {
		s.poll = DefaultSequencePoll
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Wake makes Run look at once instead of at its next poll. Call it after committing a transaction that
// appended events; it never blocks, and wakes that come while Run is busy fold into one more look.
func (s *Sequencer) Wake() {
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Drain calls Sequence until a call numbers less than a full batch, and returns how many events it
// numbered in all. It is what Run does when woken, for callers that drive the numbering themselves
// (tests, a one-shot pass).
func (s *Sequencer) Drain(ctx context.Context) (int, error) {
	if s == nil || s.log == nil {
		return 0, errZeroSequencer
	}
	total := 0
	for {
		n, err := s.once(ctx)
		total += n
		if err != nil || n < s.batch {
			return total, err
		}
	}
}

// once makes one Sequence call and reports its runs.
func (s *Sequencer) once(ctx context.Context) (int, error) {
	runs, err := s.log.Sequence(ctx, s.batch)
	n := 0
	for _, r := range runs {
		n += len(r.IDs)
	}
	if n > 0 && s.onSequenced != nil {
		s.onSequenced(runs)
	}
	return n, err
}

// Run numbers events until ctx is cancelled, then returns nil. Errors are logged and retried.
func (s *Sequencer) Run(ctx context.Context) error {
	if s == nil || s.log == nil {
		return errZeroSequencer
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.wake:
			timer.Stop()
		}
		n, err := s.once(ctx)
		wait := s.poll
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, s.poll), maxSequenceBackoff)
			wait = backoff
			s.logger.ErrorContext(ctx, "producer: numbering events failed", "error", err, "retry_in", wait)
		case n > 0:
			backoff, wait = 0, 0
		default:
			backoff = 0
		}
		timer.Reset(wait)
	}
}
