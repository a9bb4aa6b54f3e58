// Package ids makes the prefixed random identifiers the platform's resources carry — "ord_…",
// "evt_…", "we_…" — the same way the library makes its own: a prefix that names the kind of resource,
// an underscore, and 128 bits from crypto/rand as 26 lowercase base32 characters. An ID tells nothing
// about any other (no counter, no time), is safe in a URL, a header and a JSON string without
// escaping, and says what it is when it turns up in a log.
//
//	var orderIDs = ids.MustPrefix("ord") // at package level, like regexp.MustCompile
//
//	order.ID = orderIDs.New() // "ord_3xk2…"
//	if !orderIDs.Valid(r.PathValue("id")) {
//		// not an order ID at all: answer 404 without a lookup
//	}
package ids

import (
	"fmt"

	"github.com/svcplatform/conventions/internal/randid"
)

// RandomLen is the length of an ID's random part: 128 bits in unpadded base32.
const RandomLen = 26

// MaxPrefixLen bounds a prefix, so that an ID stays short enough to read.
const MaxPrefixLen = 16

// Prefix names a kind of resource and makes its IDs. It is a small comparable value, safe for
// concurrent use. The zero Prefix makes and accepts IDs with no prefix at all: the 26 random
// characters alone.
type Prefix struct {
	head string // the name and its underscore; "" for the zero Prefix
}

// NewPrefix returns the Prefix for name: 1 to MaxPrefixLen lowercase ASCII letters and digits,
// starting with a letter ("ord", "evt", "we"). The underscore is added, not given. Anything else is
// an error, so that every ID of a service has the one shape that Valid checks.
func NewPrefix(name string) (Prefix, error) {
	if name == "" || len(name) > MaxPrefixLen {
		return Prefix{}, fmt.Errorf("ids: prefix %q must be 1 to %d characters", name, MaxPrefixLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return Prefix{}, fmt.Errorf("ids: prefix %q must be lowercase letters and digits, starting with a letter", name)
		}
	}
	return Prefix{head: name + "_"}, nil
}

// MustPrefix is NewPrefix for a constant name at package level; it panics on a name NewPrefix
// refuses, as regexp.MustCompile does on a bad pattern.
func MustPrefix(name string) Prefix {
	p, err := NewPrefix(name)
	if err != nil {
		panic(err)
	}
	return p
}

// New returns a fresh ID: the prefix, an underscore and RandomLen random characters.
func (p Prefix) New() string { return randid.New(p.head) }

// Valid reports whether id has exactly the shape New makes for this prefix. It is a check of shape,
// not of existence: a handler uses it to answer an ID of the wrong kind (a "we_…" where an order's
// is expected, a pasted key) with 404 before any lookup, and without quoting it.
func (p Prefix) Valid(id string) bool {
	if len(id) != len(p.head)+RandomLen || id[:len(p.head)] != p.head {
		return false
	}
	for i := len(p.head); i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// String returns the prefix with its underscore, "ord_"; "" for the zero Prefix.
func (p Prefix) String() string { return p.head }
