package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// idemTimeLen is the width of an idemTime string: the decimal digits of the largest uint64.
const idemTimeLen = 20

// idemTime encodes t as a fixed-width decimal string whose string order is the order of the instants,
// to the nanosecond. Lua (5.1, as in Redis) compares strings exactly but holds numbers as doubles,
// which would round today's Unix nanoseconds to about 256 ns. The offset of 2^63 maps the signed range
// onto unsigned values, so instants before 1970 still sort first.
func idemTime(t time.Time) string {
	var b [idemTimeLen]byte
	u := uint64(t.UnixNano()) + 1<<63
	for i := idemTimeLen - 1; i >= 0; i-- {
		b[i] = byte('0' + u%10)
		u /= 10
	}
	return string(b[:])
}

// idemParseTime decodes an idemTime string.
func idemParseTime(s string) (time.Time, error) {
	if len(s) != idemTimeLen {
		return time.Time{}, fmt.Errorf("redisstore: bad stored time %q", s)
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("redisstore: bad stored time %q", s)
	}
	return time.Unix(0, int64(u-1<<63)).UTC(), nil
}

// idemMillisCeil is t in Unix milliseconds, rounded up, so that a TTL computed from it never ends a
// record before its retention does.
func idemMillisCeil(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

// idemTTL is the retention left at now in whole milliseconds, rounded up and at least 1 (PEXPIRE
// deletes the key for anything less).
func idemTTL(now, expiresAt time.Time) int64 {
	d := expiresAt.Sub(now)
	if d <= 0 {
		return 1
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	if ms > math.MaxInt64/2 {
		ms = math.MaxInt64 / 2
	}
	return ms
}

// idemEncodeHeader keeps a replayed header exactly: JSON of the map, and absent (ok=false) for nil so
// that nil and empty headers stay distinct.
func idemEncodeHeader(h http.Header) (data []byte, ok bool, err error) {
	if h == nil {
		return nil, false, nil
	}
	data, err = json.Marshal(h)
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: encode response header: %w", err)
	}
	return data, true, nil
}

// idemDecodeHeader reverses idemEncodeHeader; v is nil when the field was absent.
func idemDecodeHeader(v any) (http.Header, error) {
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("redisstore: stored header is not a string")
	}
	var h http.Header
	if err := json.Unmarshal([]byte(s), &h); err != nil {
		return nil, fmt.Errorf("redisstore: decode stored header: %w", err)
	}
	return h, nil
}

// idemDecodeBody turns a reply element into a body; nil stays nil.
func idemDecodeBody(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("redisstore: stored body is not a string")
	}
	return []byte(s), nil
}
