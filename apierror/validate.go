package apierror

// Collector gathers the violations a handler finds so that it can answer all of them in one 400
// instead of making the client fix one field per round trip. The zero value is empty and ready to use;
// a Collector is not safe for concurrent use.
//
//	var c apierror.Collector
//	c.Require("/account", in.Account != "")
//	c.Check(in.Side == "buy" || in.Side == "sell", apierror.Body("/side", "invalid_enum", "must be buy or sell"))
//	if err := c.Err(); err != nil {
//		return err
//	}
type Collector struct {
	violations []Violation
}

// Add records a violation.
func (c *Collector) Add(v Violation) { c.violations = append(c.violations, v) }

// Check records v when ok is false, and reports ok.
func (c *Collector) Check(ok bool, v Violation) bool {
	if !ok {
		c.Add(v)
	}
	return ok
}

// Require records a field_missing violation at the body pointer when present is false, and reports
// present.
func (c *Collector) Require(pointer string, present bool) bool {
	return c.Check(present, Body(pointer, CodeFieldMissing, "is required"))
}

// Violations returns the violations recorded so far.
func (c *Collector) Violations() []Violation { return c.violations }

// Err returns nil when nothing was recorded, and otherwise a 400 *Error listing every violation.
func (c *Collector) Err() error {
	if len(c.violations) == 0 {
		return nil
	}
	return Invalid(c.violations...)
}
