package pgstore

// Range retrieval: a stream's events by sequence, decoded from raw rows into few allocations.

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// evlogInt clamps a sequence to bigint: sequences never reach 2⁶³, but a client's "to" may.
func evlogInt(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Range implements driver.Log. Rows are decoded from their raw values into two buffers (one for
// the IDs, chunks for the data), with type and API version interned, so that a page of a thousand
// events costs a handful of allocations instead of several per event.
func (l *EventLog) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if from > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	return l.readRange(ctx, l.sql.rangeQ, stream, from, to, limit, int64(limit)+1)
}

// RangeBytes implements driver.ByteRanger: one statement, like Range, that reads the data of the
// events it returns only, adding their lengths up in the database.
func (l *EventLog) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	if l == nil || l.db == nil {
		return nil, false, errZeroEventLog
	}
	if from > math.MaxInt64 {
		return nil, false, ctx.Err()
	}
	return l.readRange(ctx, l.sql.rangeBytes, stream, from, to, limit, int64(limit), int64(maxBytes))
}

// readRange runs a range statement ($1 stream, $2 from, $3 to, then extra) and decodes its rows:
// rangeQ's seven columns, where a row past the limit says that more follow, or rangeBytes' eight,
// whose last marks that row.
func (l *EventLog) readRange(ctx context.Context, sql, stream string, from, to uint64, limit int, extra ...any) ([]webhook.Event, bool, error) {
	rows, err := l.db.Query(ctx, sql, append([]any{stream, int64(from), evlogInt(to)}, extra...)...)
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: event log range: %w", err)
	}
	defer rows.Close()
	var (
		out     = make([]webhook.Event, 0, min(uint64(limit)+1, to-from+1, 1024))
		idEnds  []int
		ids     []byte
		data    evlogArena
		strs    = make(map[string]string)
		pruned  int64
		scanErr error
		after   bool // rangeBytes' row after the page: more follow
	)
	intern := func(b []byte) string {
		if s, ok := strs[string(b)]; ok {
			return s
		}
		s := string(b)
		strs[s] = s
		return s
	}
	fds := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != len(fds) || (len(raw) != 7 && len(raw) != 8) {
			return nil, false, errors.New("pgstore: event log range: unexpected columns")
		}
		if pruned, scanErr = evlogRawInt(raw[0], fds[0].Format); scanErr != nil {
			break
		}
		if raw[1] == nil {
			continue // the stream exists but has nothing in the range
		}
		if len(raw) == 8 && len(raw[7]) == 1 && (raw[7][0] == 1 || raw[7][0] == 't') {
			after = true // bool is one byte in binary (1) and in text ('t')
			continue
		}
		var ev webhook.Event
		seq, err1 := evlogRawInt(raw[1], fds[1].Format)
		created, err2 := evlogRawInt(raw[4], fds[4].Format)
		ev.Data, scanErr = data.bytea(raw[6], fds[6].Format)
		if scanErr = errors.Join(err1, err2, scanErr); scanErr != nil {
			break
		}
		// text columns arrive as their UTF-8 bytes in the text and the binary format alike.
		ev.Sequence, ev.Created = uint64(seq), created
		ev.Type, ev.APIVersion = intern(raw[3]), intern(raw[5])
		ids = append(ids, raw[2]...)
		idEnds = append(idEnds, len(ids))
		out = append(out, ev)
	}
	if err := errors.Join(scanErr, rows.Err()); err != nil {
		return nil, false, fmt.Errorf("pgstore: event log range: %w", err)
	}
	if from <= uint64(pruned) {
		return nil, false, &driver.PrunedError{Stream: stream, FirstRetained: uint64(pruned) + 1}
	}
	all, start := string(ids), 0
	for i, end := range idEnds {
		out[i].ID, start = all[start:end], end
	}
	more := after || len(out) > limit
	if len(out) > limit {
		out = out[:limit]
	}
	return out, more, nil
}

// evlogRawInt decodes a bigint in either wire format.
func evlogRawInt(b []byte, format int16) (int64, error) {
	if format == pgx.BinaryFormatCode {
		if len(b) != 8 {
			return 0, errors.New("bigint of the wrong size")
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// evlogArena hands out byte slices from shared chunks, each capped so an append cannot spill into
// its neighbour.
type evlogArena struct{ buf []byte }

const evlogChunk = 64 << 10

// bytea decodes a bytea in either wire format (text is "\x" and hex digits) into the arena.
func (a *evlogArena) bytea(b []byte, format int16) ([]byte, error) {
	n := len(b)
	if format != pgx.BinaryFormatCode {
		if len(b) < 2 || b[0] != '\\' || b[1] != 'x' {
			return nil, errors.New("bytea in an unexpected text form")
		}
		b, n = b[2:], (len(b)-2)/2
	}
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(evlogChunk, n))
	}
	start := len(a.buf)
	if format == pgx.BinaryFormatCode {
		a.buf = append(a.buf, b...)
	} else {
		var err error
		if a.buf, err = hex.AppendDecode(a.buf, b); err != nil {
			return nil, err
		}
	}
	return a.buf[start:len(a.buf):len(a.buf)], nil
}
