package versioning

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Change is one breaking change, introduced by Version: the small, named transform that turns
// Version's shape into the previous version's shape (Stripe's version-change modules). Handlers only
// ever produce the newest shape; for a request on an older version the router applies, newest first,
// the changes of every version between the two.
//
// A Change is a plain value, safe for concurrent use as long as its functions are; the zero value is
// not a valid change (NewRegistry needs a Name and a Version). Its functions
// receive JSON decoded with json.Decoder.UseNumber, so numbers arrive as json.Number and keep every
// digit (amounts must not pass through float64); they change the value in place. An error aborts the
// transform: the router answers 500 for a response and renders an *apierror.Error from a request
// transform as it is (so a request transform may report a located 400).
//
// A Change with no function at all is allowed: it documents a version step that needs no reshaping
// (for a version served by its own Handler, say), which keeps every step of the chain explicit.
type Change struct {
	// Name identifies the change: lowercase snake_case, unique in the registry
	// ("order_side_renamed"). Golden files and errors use it.
	Name string
	// Version is the version that introduced the change. It cannot be the oldest registered
	// version: there is no previous shape to map to.
	Version string
	// Description says what changed, for changelogs and upgrade guides.
	Description string
	// Object, when set, scopes Response to the JSON objects whose "object" member equals it, wherever
	// they appear: at the top, in lists, nested in other objects, and in webhook event data (a resource
	// has one shape per version everywhere it appears). When empty, Response receives the top-level
	// response body, when that is an object, and is not applied to events.
	Object string
	// Response maps a response body (or, with Object, each matching resource) of Version's shape to
	// the previous version's shape.
	Response func(obj map[string]any) error
	// Request maps a request body of the previous version's shape to Version's shape: requests go the
	// other way, from the client's older shape up to the newest that the handler reads. It receives
	// the top-level JSON object; requests whose body is not a JSON object are left alone.
	Request func(body map[string]any) error
	// Event maps a webhook event of Version's shape (its type and data) to the previous version's.
	Event func(p *Payload) error
}

// Payload is a webhook event's type and data, as an Event transform sees and changes them. Each
// transform call gets its own; it is not shared between goroutines. It is a plain value; the zero value is
// an event with no type and no data.
type Payload struct {
	// Type is the event type ("order.created"); a change may rename it.
	Type string
	// Data is the event's data object.
	Data map[string]any
}

// EventShape is a webhook event's type and raw data at one API version: what a producer stores and
// what RenderEvent turns into a licensee's version. It is a plain value; RenderEvent never modifies
// the Data it is given. The zero EventShape names no version, so rendering it at any version is an
// error wrapping ErrUnknownVersion.
type EventShape struct {
	Version string
	Type    string
	Data    json.RawMessage
}

// shapesResponses reports whether the change alters responses.
func (c *Change) shapesResponses() bool { return c.Response != nil }

// shapesEvents reports whether the change alters webhook events.
func (c *Change) shapesEvents() bool { return c.Event != nil || (c.Object != "" && c.Response != nil) }

// ApplyResponse applies this change alone to a response body of c.Version's shape and returns the
// previous version's body. It is what golden tests call; the router applies whole chains.
func (c Change) ApplyResponse(body []byte) ([]byte, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("versioning: change %s: %w", c.Name, err)
	}
	if err := c.applyResponse(v); err != nil {
		return nil, err
	}
	return encodeJSON(v, body)
}

// ApplyRequest applies this change alone to a request body of the previous version's shape and
// returns c.Version's body.
func (c Change) ApplyRequest(body []byte) ([]byte, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("versioning: change %s: %w", c.Name, err)
	}
	if obj, ok := v.(map[string]any); ok {
		if err := c.applyRequest(obj); err != nil {
			return nil, err
		}
	}
	return encodeJSON(v, body)
}

// ApplyEvent applies this change alone to an event of c.Version's shape and returns the previous
// version's type and data.
func (c Change) ApplyEvent(eventType string, data []byte) (string, []byte, error) {
	p, err := decodePayload(eventType, data)
	if err != nil {
		return "", nil, fmt.Errorf("versioning: change %s: %w", c.Name, err)
	}
	if err := c.applyEvent(p); err != nil {
		return "", nil, err
	}
	out, err := encodeJSON(p.Data, nil)
	return p.Type, out, err
}

func (c *Change) fail(kind string, err error) error {
	return fmt.Errorf("%w: change %s (%s) %s: %w", ErrTransform, c.Name, c.Version, kind, err)
}

func (c *Change) applyResponse(v any) error {
	if c.Response == nil {
		return nil
	}
	if c.Object == "" {
		if obj, ok := v.(map[string]any); ok {
			if err := c.Response(obj); err != nil {
				return c.fail("response", err)
			}
		}
		return nil
	}
	if err := c.walk(v); err != nil {
		return c.fail("response", err)
	}
	return nil
}

func (c *Change) applyRequest(obj map[string]any) error {
	if c.Request == nil {
		return nil
	}
	if err := c.Request(obj); err != nil {
		// A request transform may reject the client's input with a located problem: keep it
		// reachable for apierror.Write.
		return c.fail("request", err)
	}
	return nil
}

// applyEvent applies the resource transform to the event's data, then the event transform.
func (c *Change) applyEvent(p *Payload) error {
	if c.Object != "" && c.Response != nil {
		if err := c.walk(p.Data); err != nil {
			return c.fail("event", err)
		}
	}
	if c.Event != nil {
		if err := c.Event(p); err != nil {
			return c.fail("event", err)
		}
		if p.Data == nil {
			return c.fail("event", errors.New("event data set to nil"))
		}
	}
	return nil
}

// walk applies c.Response to every object whose "object" member is c.Object, children first, so
// that what a transform builds is never visited again.
func (c *Change) walk(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for _, child := range x {
			switch child.(type) {
			case map[string]any, []any:
				if err := c.walk(child); err != nil {
					return err
				}
			}
		}
		if s, ok := x["object"].(string); ok && s == c.Object {
			return c.Response(x)
		}
	case []any:
		for _, child := range x {
			if err := c.walk(child); err != nil {
				return err
			}
		}
	}
	return nil
}

// errNotJSON marks a body that is not one JSON value.
var errNotJSON = errors.New("body is not a single JSON value")

// decodeJSON decodes one JSON value, keeping numbers exact.
func decodeJSON(data []byte) (any, error) { return parseJSON(data) }

func decodePayload(eventType string, data []byte) (*Payload, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("event data is not a JSON object")
	}
	return &Payload{Type: eventType, Data: obj}, nil
}

// encodeJSON encodes v without HTML escaping (the handler's "<" stays "<"), ending with a newline
// exactly when like did, so a transformed body keeps the handler's framing.
func encodeJSON(v any, like []byte) ([]byte, error) {
	out, err := appendJSON(make([]byte, 0, len(like)+64), v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode: %w", ErrTransform, err)
	}
	if len(like) > 0 && like[len(like)-1] == '\n' {
		out = append(out, '\n')
	}
	return out, nil
}
