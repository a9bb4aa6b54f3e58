package server

import (
	"net/http"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/ids"
)

// Order is the reference server's one business resource, exactly as it goes over the wire in the
// newest version, v2:
//
//	{"id":"ord_…","object":"order","account":"acc_1","direction":"buy","status":"created","created":1767225600}
//
// v1 calls the direction "side" (the order_side_renamed_direction change in versions.go reshapes
// every order, in responses and in webhook events, for licensees pinned to v1). It is also the data
// of the order.created webhook event.
type Order struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // always "order": clients can tell resources apart without the URL
	Account   string `json:"account"`
	Direction string `json:"direction"`
	Status    string `json:"status"`  // "created"; the spec publishes no other state yet
	Created   int64  `json:"created"` // Unix seconds, like every timestamp of the platform
}

// Directions an order may take. The spec leaves them unpublished; the examples decide buy and sell.
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

// createOrderRequest is the body of POST /v2/orders. Pointers tell an absent or null member (which is
// "required") from an empty one (which is "too short"): the client learns the precise reason.
type createOrderRequest struct {
	Account   *string `json:"account"`
	Direction *string `json:"direction"`
}

// createOrderRequestV1 is the body of POST /v1/orders: the direction is called side.
type createOrderRequestV1 struct {
	Account *string `json:"account"`
	Side    *string `json:"side"`
}

// decodeCreateOrder decodes and validates the body of POST /{version}/orders in that version's own
// shape, strictly: a v1 body with "direction", or a v2 body with "side", has an unknown member, and
// every violation is located at the member the client sent (/side for v1). This is why orders have
// no Request transform: a transform would run before the handler, and a v1 client that left side
// out would be told that /direction is missing.
func decodeCreateOrder(r *http.Request, version string) (createOrderRequest, error) {
	if version == "v1" {
		var v1 createOrderRequestV1
		if err := apierror.Decode(r, &v1, nil); err != nil {
			return createOrderRequest{}, err
		}
		in := createOrderRequest{Account: v1.Account, Direction: v1.Side}
		return in, in.validate("/side")
	}
	var in createOrderRequest
	if err := apierror.Decode(r, &in, nil); err != nil {
		return createOrderRequest{}, err
	}
	return in, in.validate("/direction")
}

// validate lists every violation at once, each located by its JSON Pointer, so a client fixes its
// request in one round trip. direction is the pointer of the direction in the request's version.
func (in createOrderRequest) validate(direction string) error {
	var c apierror.Collector
	if c.Require("/account", in.Account != nil) {
		a := *in.Account
		if c.Check(len(a) >= 1 && len(a) <= maxAccountLen, apierror.Body("/account", CodeInvalidLength,
			"must be 1 to 64 characters long")) {
			c.Check(validAccount(a), apierror.Body("/account", CodeInvalidFormat,
				"may contain only letters A-Z and a-z, digits, '_' and '-'"))
		}
	}
	if c.Require(direction, in.Direction != nil) {
		c.Check(*in.Direction == SideBuy || *in.Direction == SideSell, apierror.Body(direction, CodeInvalidEnum,
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
	return Order{ID: orderIDs.New(), Object: "order", Account: *in.Account, Direction: *in.Direction,
		Status: "created", Created: now.Unix()}
}

// The server's IDs: a prefix naming the resource and 128 random bits. Random rather than sequential,
// so that an ID reveals nothing about how many orders exist or who created the previous one.
var (
	orderIDs    = ids.MustPrefix("ord")
	endpointIDs = ids.MustPrefix("we")
	licenseeIDs = ids.MustPrefix("lic")
	adminTokens = ids.MustPrefix("adm")
)
