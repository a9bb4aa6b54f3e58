package server

import (
	"crypto/rand"
	"encoding/base32"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Order is the reference server's one business resource, exactly as it goes over the wire:
//
//	{"id":"ord_…","object":"order","account":"acc_1","side":"buy","status":"created","created":1767225600}
//
// It is also the data of the order.created webhook event.
type Order struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // always "order": clients can tell resources apart without the URL
	Account string `json:"account"`
	Side    string `json:"side"`
	Status  string `json:"status"`  // "created"; the spec publishes no other state yet
	Created int64  `json:"created"` // Unix seconds, like every timestamp of the platform
}

// Sides an order may take. The spec leaves them unpublished; the examples decide buy and sell.
const (
	SideBuy  = "buy"
	SideSell = "sell"
)

// Problem codes of order validation, beside apierror's own (field_missing, wrong_type, …).
const (
	CodeInvalidLength = "invalid_length"
	CodeInvalidFormat = "invalid_format"
	CodeInvalidEnum   = "invalid_enum"
	CodeOrderNotFound = "order_not_found"
)

// maxAccountLen bounds an account identifier.
const maxAccountLen = 64

// createOrderRequest is the body of POST /v1/orders. Pointers tell an absent or null member (which is
// "required") from an empty one (which is "too short"): the client learns the precise reason.
type createOrderRequest struct {
	Account *string `json:"account"`
	Side    *string `json:"side"`
}

// validate lists every violation at once, each located by its JSON Pointer, so a client fixes its
// request in one round trip.
func (in createOrderRequest) validate() error {
	var c apierror.Collector
	if c.Require("/account", in.Account != nil) {
		a := *in.Account
		if c.Check(len(a) >= 1 && len(a) <= maxAccountLen, apierror.Body("/account", CodeInvalidLength,
			"must be 1 to 64 characters long")) {
			c.Check(validAccount(a), apierror.Body("/account", CodeInvalidFormat,
				"may contain only letters A-Z and a-z, digits, '_' and '-'"))
		}
	}
	if c.Require("/side", in.Side != nil) {
		c.Check(*in.Side == SideBuy || *in.Side == SideSell, apierror.Body("/side", CodeInvalidEnum,
			"must be one of buy, sell"))
	}
	return c.Err()
}

// validAccount reports whether every byte is one of [A-Za-z0-9_-]. Bytes, not runes: a non-ASCII
// letter is refused, never counted as one character.
func validAccount(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// newOrder builds the order a valid request creates.
func newOrder(in createOrderRequest, now time.Time) Order {
	return Order{ID: newID("ord_"), Object: "order", Account: *in.Account, Side: *in.Side,
		Status: "created", Created: now.Unix()}
}

// idEncoding is lowercase base32 without padding: IDs are safe in URLs, headers and JSON unescaped.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix and 128 random bits. Random rather than sequential, so that an ID reveals
// nothing about how many orders exist or who created the previous one.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + idEncoding.EncodeToString(b[:])
}
