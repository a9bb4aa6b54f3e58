package pgstore

// Append and AppendBatch: events into the pending table, unnumbered, in the caller's transaction
// when it runs on one.

import (
	"context"
	"fmt"
	"slices"

	"github.com/svcplatform/conventions/ids"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// eventIDs names the events Append stores without an ID: "evt_" and 128 random bits, as the producer's
// own in-memory logs name theirs.
var eventIDs = ids.MustPrefix("evt")

// Append implements driver.Log: it stores the event unnumbered and returns it with Sequence 0
// (Sequence numbers it once it has committed). On a pgx.Tx it joins the caller's transaction.
func (l *EventLog) Append(ctx context.Context, e driver.StreamEvent) (webhook.Event, error) {
	if l == nil || l.db == nil {
		return webhook.Event{}, errZeroEventLog
	}
	stream, ev := e.Stream, e.Event
	if ev.ID == "" {
		ev.ID = eventIDs.New()
	}
	args := []any{stream, ev.ID, ev.Type, ev.Created, ev.APIVersion, []byte(ev.Data), e.TraceParent, e.TraceState}
	if l.cfg.MaxStreamEvents > 0 {
		args = append(args, int64(l.cfg.MaxStreamEvents))
	}
	tag, err := l.db.Exec(ctx, l.sql.append, args...)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("pgstore: event log append: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return webhook.Event{}, fmt.Errorf("pgstore: event log append: %w: stream %q keeps at most %d (EventLogOptions.MaxStreamEvents)",
			driver.ErrStreamFull, stream, l.cfg.MaxStreamEvents)
	}
	ev.Sequence = 0
	ev.Data = slices.Clone(ev.Data)
	return ev, nil
}

// AppendBatch implements driver.BatchAppender: one statement stores every event unnumbered, all or
// none, and returns them with Sequence 0. Sequence numbers them in the batch's order. On a pgx.Tx it
// joins the caller's transaction.
func (l *EventLog) AppendBatch(ctx context.Context, events []driver.StreamEvent) ([]webhook.Event, error) {
	if l == nil || l.db == nil {
		return nil, errZeroEventLog
	}
	if len(events) == 0 {
		return nil, ctx.Err()
	}
	var (
		out                       = make([]webhook.Event, len(events))
		streams, ids, types, vers = make([]string, len(events)), make([]string, len(events)), make([]string, len(events)), make([]string, len(events))
		created                   = make([]int64, len(events))
		datas                     = make([][]byte, len(events))
		parents, states           = make([]string, len(events)), make([]string, len(events))
	)
	for i, se := range events {
		ev := se.Event
		if ev.ID == "" {
			ev.ID = eventIDs.New()
		}
		ev.Sequence = 0
		ev.Data = slices.Clone(ev.Data)
		out[i] = ev
		streams[i], ids[i], types[i], vers[i], created[i], datas[i] = se.Stream, ev.ID, ev.Type, ev.APIVersion, ev.Created, ev.Data
		parents[i], states[i] = se.TraceParent, se.TraceState
	}
	args := []any{streams, ids, types, created, vers, datas, parents, states}
	if l.cfg.MaxStreamEvents > 0 {
		args = append(args, int64(l.cfg.MaxStreamEvents))
	}
	tag, err := l.db.Exec(ctx, l.sql.appendBatch, args...)
	if err == nil && tag.RowsAffected() != int64(len(events)) {
		return nil, fmt.Errorf("pgstore: event log append: %w: a stream of the batch keeps at most %d (EventLogOptions.MaxStreamEvents)",
			driver.ErrStreamFull, l.cfg.MaxStreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: event log append: %w", err)
	}
	return out, nil
}
