// Package retryafter reads a Retry-After header value (RFC 9110 §10.2.3), for the clients of this
// module that honour it: the idempotency Transport and the webhook Dispatcher.
package retryafter

import (
	"net/http"
	"strconv"
	"time"
)

// longest bounds what Parse returns: any wait this long is past every caller's maximum.
const longest = 24 * time.Hour

// Parse returns the wait a Retry-After value asks for at now: delay-seconds, or an HTTP-date (a date
// already past is no wait). It reports false for an empty or malformed value, and for a negative
// delay. Waits are capped at a day, so that a huge number cannot overflow a Duration.
func Parse(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(longest/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), longest), true
	}
	return 0, false
}
