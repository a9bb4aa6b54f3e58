// Package check holds the few comparisons the conformance suites make (idempotency/storetest,
// webhook/cursortest, versioning/pintest, apikey/credentialtest, webhook/producer/driver/drivertest,
// portal/portaltest), on the standard library alone: store authors import those suites into their own tests, and an assertion
// library imported here would become a dependency of every one of them.
//
// Every function reports through t.Fatalf, so a failure ends the subtest it happened in and is listed
// under that subtest's name, and t.Helper places the report at the suite's line. A message says what
// was wanted and what came, after the caller's context (msgAndArgs: a format and its arguments, or a
// single value). Like t.FailNow, the functions must be called from the test's own goroutine; a
// goroutine a test starts reports with t.Errorf instead.
package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// NoError fails unless err is nil.
func NoError(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sgot error %q, want none", prefix(msgAndArgs), err)
	}
}

// Error fails if err is nil.
func Error(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("%sgot no error, want one", prefix(msgAndArgs))
	}
}

// ErrorIs fails unless errors.Is(err, target).
func ErrorIs(t testing.TB, err, target error, msgAndArgs ...any) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%sgot no error, want %q", prefix(msgAndArgs), target)
	case !errors.Is(err, target):
		t.Fatalf("%sgot error %q, want one that is %q", prefix(msgAndArgs), err, target)
	}
}

// NotErrorIs fails if errors.Is(err, target).
func NotErrorIs(t testing.TB, err, target error, msgAndArgs ...any) {
	t.Helper()
	if errors.Is(err, target) {
		t.Fatalf("%sgot error %q, want one that is not %q", prefix(msgAndArgs), err, target)
	}
}

// Equal fails unless want and got are equal by reflect.DeepEqual: nil and empty slices and maps
// differ, and times must match in every field (use Instant for the same instant).
func Equal[T any](t testing.TB, want, got T, msgAndArgs ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%sgot %s, want %s", prefix(msgAndArgs), show(got), show(want))
	}
}

// NotEqual fails if unwanted and got are equal by reflect.DeepEqual.
func NotEqual[T any](t testing.TB, unwanted, got T, msgAndArgs ...any) {
	t.Helper()
	if reflect.DeepEqual(unwanted, got) {
		t.Fatalf("%sgot %s, want anything else", prefix(msgAndArgs), show(got))
	}
}

// True fails if cond is false; the message is all the report says, so it should say what was wanted
// and, where it helps, what came.
func True(t testing.TB, cond bool, msgAndArgs ...any) {
	t.Helper()
	if !cond {
		msg := message(msgAndArgs)
		if msg == "" {
			msg = "condition is false"
		}
		t.Fatalf("%s", msg)
	}
}

// Len fails unless s has n elements.
func Len[E any](t testing.TB, s []E, n int, msgAndArgs ...any) {
	t.Helper()
	if len(s) != n {
		t.Fatalf("%sgot %d elements, want %d: %s", prefix(msgAndArgs), len(s), n, show(s))
	}
}

// Instant fails unless got is the same instant as want (time.Time.Equal: the location and monotonic
// reading may differ). Pass the zero time to require a time that is unset.
func Instant(t testing.TB, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%sgot %s, want %s", prefix(msgAndArgs), showTime(got), showTime(want))
	}
}

// JSONEq fails unless want and got are JSON documents with the same value.
func JSONEq(t testing.TB, want, got string, msgAndArgs ...any) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%swant is not JSON: %v: %s", prefix(msgAndArgs), err, show(want))
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%sgot %s, which is not JSON (%v); want %s", prefix(msgAndArgs), show(got), err, show(want))
	}
	if !reflect.DeepEqual(w, g) {
		t.Fatalf("%sgot JSON %s, want %s", prefix(msgAndArgs), show(got), show(want))
	}
}

// message formats msgAndArgs the way the suites pass them: nothing, one value, or a format and its
// arguments.
func message(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprint(msgAndArgs[0])
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

func prefix(msgAndArgs []any) string {
	if msg := message(msgAndArgs); msg != "" {
		return msg + ": "
	}
	return ""
}

// maxShown bounds a value in a report: a suite compares bodies of a MiB.
const maxShown = 2000

func show(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(v)
	case []byte:
		if v == nil {
			s = "[]byte(nil)"
		} else {
			s = "[]byte(" + strconv.Quote(string(v)) + ")"
		}
	case time.Time:
		s = showTime(v)
	case error:
		s = strconv.Quote(v.Error())
	default:
		if rv := reflect.ValueOf(v); v == nil || isNil(rv) {
			s = "nil" // not "[]" or "map[]": nil and empty differ here
		} else {
			s = fmt.Sprintf("%+v", v)
		}
	}
	if len(s) > maxShown {
		s = s[:maxShown] + fmt.Sprintf("… (%d bytes shown of %d)", maxShown, len(s))
	}
	return s
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func:
		return v.IsNil()
	}
	return false
}

func showTime(t time.Time) string {
	if t.IsZero() {
		return "the zero time"
	}
	return t.Format(time.RFC3339Nano)
}
