package versioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// maxSwapAttempts bounds the compare-and-swap retries of Upgrade and Repin under contention.
const maxSwapAttempts = 8

// Pin returns the licensee's pin, or an error wrapping ErrNotPinned. A licensee that is not 1 to
// MaxLicenseeLen bytes of valid UTF-8 without NUL is ErrInvalidPin, here and in every method that
// takes one.
func (rt *Router) Pin(ctx context.Context, licensee string) (Pin, error) {
	if rt == nil || rt.reg == nil {
		return Pin{}, errZeroRouter
	}
	if err := checkLicensee(licensee); err != nil {
		return Pin{}, err
	}
	return rt.pins.Get(ctx, licensee)
}

// Pins returns up to limit pins (1..MaxPinList) ordered by licensee, bytewise, starting after the
// licensee after ("" for the start; not necessarily a pinned one). A non-empty version, which must
// be a well-formed name, keeps only the pins on it: who still sits on a deprecated version, including
// licensees that only receive webhooks and so never show in Options.Hooks. Arguments outside
// these rules are ErrInvalidPin.
func (rt *Router) Pins(ctx context.Context, version, after string, limit int) ([]Pin, error) {
	if rt == nil || rt.reg == nil {
		return nil, errZeroRouter
	}
	if err := checkList(version, after, limit); err != nil {
		return nil, err
	}
	return rt.pins.List(ctx, version, after, limit)
}

// Upgrade moves the licensee's pin to the version to: the explicit, documented upgrade path. The
// target must be registered and answering now (ErrUnknownVersion, ErrVersionSunset), and not older
// than the current pin (ErrDowngrade) unless the current pin has lapsed (sunset or removed).
// Upgrading to the version already pinned succeeds without a change; an unpinned licensee is pinned
// to to. Upgrade is safe against concurrent changes: it moves the pin by compare-and-swap. The
// resulting pin's Previous is the version it came from, to which Rollback may return it within
// Options.RollbackWindow.
func (rt *Router) Upgrade(ctx context.Context, licensee, to string) (Pin, error) {
	return rt.repin(ctx, licensee, to, forwardOnly)
}

// Rollback moves the licensee's pin back to the version its last upgrade came from (Pin.Previous),
// within Options.RollbackWindow of that upgrade: the licensee's way out of an upgrade that broke its
// integration. The resulting pin's Previous is the newer version, so a rollback cannot be rolled
// back in turn (Upgrade goes forward again, and opens a new window).
//
// An unpinned licensee is ErrNotPinned; a pin whose last move was not an upgrade (or that never
// moved) is ErrNoRollback; past the window, or with a negative RollbackWindow, the upgrade is final:
// ErrRollbackExpired, whose message says since when. The version to go back to must still answer
// (ErrUnknownVersion, ErrVersionSunset). Rollback moves the pin by compare-and-swap: of concurrent
// rollbacks, and of a rollback racing an upgrade, exactly one move wins, and a rollback that loses
// decides again on the pin in force (usually ErrNoRollback).
func (rt *Router) Rollback(ctx context.Context, licensee string) (Pin, error) {
	if rt == nil || rt.reg == nil {
		return Pin{}, errZeroRouter
	}
	if err := checkLicensee(licensee); err != nil {
		return Pin{}, err
	}
	now := rt.now()
	for range maxSwapAttempts {
		cur, err := rt.pins.Get(ctx, licensee)
		if err != nil {
			return Pin{}, err
		}
		if !older(cur.Previous, cur.Version) {
			return Pin{}, fmt.Errorf("%w: pinned to %s", ErrNoRollback, cur.Version)
		}
		if err := rt.answers(cur.Previous, now); err != nil {
			return Pin{}, err
		}
		if err := rt.checkRollback(cur, now); err != nil {
			return Pin{}, err
		}
		p, done, err := rt.swap(ctx, cur, cur.Previous, now)
		if err != nil {
			return Pin{}, err
		}
		if done {
			return p, nil
		}
	}
	return Pin{}, fmt.Errorf("%w: gave up after %d attempts", ErrPinConflict, maxSwapAttempts)
}

// Repin moves the licensee's pin to any version answering now, older ones included: the support
// operation for a licensee who must go back outside the rollback window. Otherwise it behaves as
// Upgrade; like every move, it records the version the pin came from in Previous.
func (rt *Router) Repin(ctx context.Context, licensee, to string) (Pin, error) {
	return rt.repin(ctx, licensee, to, anyDirection)
}

// moveRule says which moves repin allows.
type moveRule int

const (
	forwardOnly       moveRule = iota // Upgrade: never to an older version
	anyDirection                      // Repin
	forwardOrRollback                 // the pin endpoint's POST: forward, or back to Previous within the window
)

func (rt *Router) repin(ctx context.Context, licensee, to string, rule moveRule) (Pin, error) {
	if rt == nil || rt.reg == nil {
		return Pin{}, errZeroRouter
	}
	now := rt.now()
	if err := checkLicensee(licensee); err != nil {
		return Pin{}, err
	}
	if err := rt.answers(to, now); err != nil {
		return Pin{}, err
	}
	for range maxSwapAttempts {
		cur, err := rt.pins.Get(ctx, licensee)
		if errors.Is(err, ErrNotPinned) {
			p, created, err := rt.pins.SetIfAbsent(ctx, licensee, to, now)
			if err != nil {
				return Pin{}, err
			}
			if !created {
				continue // pinned concurrently: decide again on that pin
			}
			rt.cache.put(licensee, p, now)
			rt.log.InfoContext(ctx, "versioning: pinned a licensee", "licensee", licensee, "version", to)
			return p, nil
		}
		if err != nil {
			return Pin{}, err
		}
		if cur.Version == to {
			rt.cache.put(licensee, cur, now)
			return cur, nil
		}
		if rule != anyDirection && !rt.pinLapsed(cur.Version, now) && rt.newer(cur.Version, to) {
			if rule != forwardOrRollback || to != cur.Previous {
				return Pin{}, fmt.Errorf("%w: pinned to %s, asked for %s", ErrDowngrade, cur.Version, to)
			}
			// Back to where the last upgrade came from: a rollback, while the window is open.
			if err := rt.checkRollback(cur, now); err != nil {
				return Pin{}, err
			}
		}
		p, done, err := rt.swap(ctx, cur, to, now)
		if err != nil {
			return Pin{}, err
		}
		if done {
			return p, nil
		}
	}
	return Pin{}, fmt.Errorf("%w: gave up after %d attempts", ErrPinConflict, maxSwapAttempts)
}

// answers reports whether a pin may be moved to the version name at now: it is registered and
// released (ErrUnknownVersion), and not sunset (ErrVersionSunset).
func (rt *Router) answers(name string, now time.Time) error {
	v, ok := rt.reg.Lookup(name)
	if !ok || !v.IsReleased(now) {
		return fmt.Errorf("%w: %q", ErrUnknownVersion, name)
	}
	if v.IsSunset(now) {
		return fmt.Errorf("%w: %s", ErrVersionSunset, name)
	}
	return nil
}

// swap moves the pin cur to the version to by compare-and-swap. It reports false, with no error,
// when the pin changed or vanished meanwhile: the caller decides again on the pin in force, so that
// a decision is only ever carried out on the pin it was made on.
func (rt *Router) swap(ctx context.Context, cur Pin, to string, now time.Time) (Pin, bool, error) {
	p, err := rt.pins.CompareAndSwap(ctx, cur.Licensee, cur.Version, to, now)
	if errors.Is(err, ErrPinConflict) || errors.Is(err, ErrNotPinned) {
		return Pin{}, false, nil
	}
	if err != nil {
		return Pin{}, false, err
	}
	rt.cache.put(cur.Licensee, p, now)
	rt.log.InfoContext(ctx, "versioning: moved a pin", "licensee", cur.Licensee, "from", cur.Version, "to", to)
	return p, true, nil
}

// checkRollback reports whether the pin p, whose Previous is older than its Version, may still be
// moved back at now: nil within the rollback window, a *rollbackExpiredError after it.
func (rt *Router) checkRollback(p Pin, now time.Time) error {
	if rt.window < 0 { // no rollback: every upgrade is final at once
		return &rollbackExpiredError{from: p.Previous, to: p.Version, final: p.PinnedAt}
	}
	final := p.PinnedAt.Add(rt.window)
	if now.Before(final) {
		return nil
	}
	return &rollbackExpiredError{from: p.Previous, to: p.Version, final: final}
}

// rollbackUntil reports until when the licensee of p may move it back to p.Previous, and false
// when it may not at now: the last move was no upgrade, the window has closed, or the previous
// version no longer answers. The window ends early when that version is sunset within it.
func (rt *Router) rollbackUntil(p Pin, now time.Time) (time.Time, bool) {
	if rt.window < 0 || !older(p.Previous, p.Version) {
		return time.Time{}, false
	}
	v, ok := rt.reg.Lookup(p.Previous)
	if !ok || !v.IsSupported(now) {
		return time.Time{}, false
	}
	until := p.PinnedAt.Add(rt.window)
	if !v.Sunset.IsZero() && v.Sunset.Before(until) {
		until = v.Sunset
	}
	return until, now.Before(until)
}

// older reports whether a and b are well-formed version names and a has the lower number.
func older(a, b string) bool {
	na, okA := parseName(a)
	nb, okB := parseName(b)
	return okA && okB && na < nb
}

// Unpin removes the licensee's pin (the sandbox's reset): its next request pins afresh.
func (rt *Router) Unpin(ctx context.Context, licensee string) error {
	if rt == nil || rt.reg == nil {
		return errZeroRouter
	}
	if err := checkLicensee(licensee); err != nil {
		return err
	}
	rt.cache.drop(licensee)
	return rt.pins.Delete(ctx, licensee)
}

// RenderEvent renders a stored webhook event at the licensee's pinned version (Registry.RenderEvent):
// the hook a webhook producer calls for each delivery. An unpinned licensee gets the event as stored:
// its first request will pin it to the newest version, which is what events are produced at.
func (rt *Router) RenderEvent(ctx context.Context, licensee string, ev EventShape) (EventShape, error) {
	if rt == nil || rt.reg == nil {
		return EventShape{}, errZeroRouter
	}
	if err := checkLicensee(licensee); err != nil {
		return EventShape{}, fmt.Errorf("%w: %w", ErrPinUnavailable, err) // as when a store refused it
	}
	pin, err := rt.pins.Get(ctx, licensee)
	switch {
	case errors.Is(err, ErrNotPinned):
		return ev, nil
	case err != nil:
		return EventShape{}, fmt.Errorf("%w: %w", ErrPinUnavailable, err)
	}
	return rt.reg.RenderEvent(ev, pin.Version)
}

// PinResource is the body of the pin endpoint's responses: a plain value for encoding/json, whose zero
// value the handler never writes (Object is always "version_pin").
type PinResource struct {
	Object    string   `json:"object"` // always "version_pin"
	Version   string   `json:"version"`
	PinnedAt  int64    `json:"pinned_at"` // Unix seconds
	Newest    string   `json:"newest_version"`
	Supported []string `json:"supported_versions"`
	// Previous is the version the pin moved from at its last move (Pin.Previous); left out when it
	// never moved.
	Previous string `json:"previous_version,omitempty"`
	// RollbackUntil is when the window to move the pin back to Previous closes, in Unix seconds
	// (rounded down); present only while such a rollback is possible.
	RollbackUntil int64 `json:"rollback_until,omitempty"`
}

// PinHandler returns the licensee's own endpoint for its pin, to mount behind authentication and
// the router (for example at "/{version}/version_pin"; a pinned licensee reaches it on its pinned
// version):
//
//	GET  → 200 {"object":"version_pin","version":"v1","pinned_at":…,"newest_version":"v2","supported_versions":[…]}
//	POST {"version":"v2"} → 200 with the new pin (Upgrade: forward)
//
// After an upgrade the pin names where it came from, and until when it may go back:
//
//	{"object":"version_pin","version":"v2","pinned_at":…,"previous_version":"v1","rollback_until":…,…}
//
// and POST {"version":"v1"} before rollback_until moves it back (Rollback), once: the pin's
// previous_version is then v2, and asking for an older version again is a plain downgrade.
//
// A request without a licensee gets 401 licensee_required; an unknown, sunset or older target gets a
// 400 located at the body member /version, except the version of the last upgrade's origin after
// its rollback window, which gets 409 version_upgrade_final there, saying since when the upgrade is
// final. The handler pins an unpinned licensee on GET as its first request would.
func (rt *Router) PinHandler() http.Handler {
	if rt == nil || rt.reg == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, errZeroRouter) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lic string
		if rt.licensee != nil {
			var err error
			if lic, err = rt.licensee(r); err != nil {
				rt.writer.Write(w, r, err)
				return
			}
		}
		if lic == "" {
			rt.writer.Write(w, r, apierror.Unauthenticated(CodeLicenseeRequired,
				"the version pin belongs to a licensee: authenticate the request"))
			return
		}
		var pin Pin
		var err error
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			if err = checkLicensee(lic); err != nil {
				break
			}
			pin, err = rt.pins.Get(r.Context(), lic)
			if errors.Is(err, ErrNotPinned) {
				now := rt.now()
				v, _ := rt.reg.NewestReleased(now)
				pin, _, err = rt.pins.SetIfAbsent(r.Context(), lic, v.Name, now)
			}
		case http.MethodPost:
			var in struct {
				Version *string `json:"version"`
			}
			if err := apierror.Decode(r, &in, nil); err != nil {
				rt.writer.Write(w, r, err)
				return
			}
			if in.Version == nil {
				rt.writer.Write(w, r, apierror.MissingField("/version"))
				return
			}
			pin, err = rt.repin(r.Context(), lic, *in.Version, forwardOrRollback)
		default:
			rt.writer.Write(w, r, apierror.MethodNotAllowed(r.Method, http.MethodGet, http.MethodHead, http.MethodPost))
			return
		}
		if err != nil {
			rt.writer.Write(w, r, rt.pinProblem(r.Context(), lic, err))
			return
		}
		now := rt.now()
		res := PinResource{Object: "version_pin", Version: pin.Version, PinnedAt: pin.PinnedAt.Unix(),
			Newest: newestOf(rt.reg.Supported(now)), Supported: rt.reg.Supported(now), Previous: pin.Previous}
		if until, ok := rt.rollbackUntil(pin, now); ok {
			res.RollbackUntil = until.Unix()
		}
		body, _ := json.Marshal(res)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(body, '\n'))
	})
}

func (rt *Router) pinProblem(ctx context.Context, lic string, err error) error {
	invalid := func(code, detail string) error {
		return apierror.Invalid(apierror.Body("/version", code, detail))
	}
	switch {
	case errors.Is(err, ErrUnknownVersion):
		return invalid(CodeVersionUnknown, "must be a supported version: "+listOrNone(rt.reg.Supported(rt.now())))
	case errors.Is(err, ErrVersionSunset):
		return invalid(CodeVersionSunset, "the version is sunset; choose a supported one")
	case errors.Is(err, ErrDowngrade):
		return invalid(CodeVersionDowngrade, "must not be older than the pinned version: an upgrade only moves forward")
	case errors.Is(err, ErrRollbackExpired):
		detail := "the upgrade is final; a pin moves back only within the rollback window after an upgrade"
		var x *rollbackExpiredError
		if errors.As(err, &x) {
			detail = "the upgrade from " + x.from + " to " + x.to + " became final at " + x.final.UTC().Format(time.RFC3339) +
				"; a pin moves back only within the rollback window after an upgrade"
		}
		return apierror.Conflict(CodeVersionUpgradeFinal, detail, apierror.Body("/version", CodeVersionUpgradeFinal, detail))
	case errors.Is(err, ErrInvalidPin):
		rt.log.ErrorContext(ctx, "versioning: the Licensee hook returned a licensee no store accepts", "error", err)
		return apierror.Internal()
	}
	rt.log.ErrorContext(ctx, "versioning: pin store failed", "licensee", lic, "error", err)
	return problemPinUnavailable(rt.retryAfter)
}

// enforcePin reads (or creates) the licensee's pin and checks the request's version against it.
func (rt *Router) enforcePin(r *http.Request, d *Decision, i int, now time.Time) error {
	ctx := r.Context()
	lic, name := d.Licensee, d.Version.Name
	if err := checkLicensee(lic); err != nil {
		rt.log.ErrorContext(ctx, "versioning: the Licensee hook returned a licensee no store accepts", "error", err)
		return &decisionError{cause: err, problem: apierror.Internal()}
	}
	pin, cached, created, err := rt.currentPin(ctx, lic, i, now, true)
	if err == nil && cached && pin.Version != name {
		// A cached pin is trusted only when it agrees with the request: it may be stale.
		pin, _, created, err = rt.currentPin(ctx, lic, i, now, false)
	}
	if err != nil {
		return rt.unavailable(ctx, lic, err)
	}
	d.Pinned, d.PinChanged = pin.Version, created
	if pin.Version == name {
		return nil
	}
	if rt.pinLapsed(pin.Version, now) && rt.newer(name, pin.Version) {
		moved, err := rt.pins.CompareAndSwap(ctx, lic, pin.Version, name, now)
		switch {
		case err == nil:
			rt.cache.put(lic, moved, now)
			rt.log.InfoContext(ctx, "versioning: moved a lapsed pin", "licensee", lic, "from", pin.Version, "to", name)
			d.Pinned, d.PinChanged = name, true
			return nil
		case errors.Is(err, ErrPinConflict) || errors.Is(err, ErrNotPinned):
			// Someone moved or removed it meanwhile: decide on what is there now.
			pin, _, created, err = rt.currentPin(ctx, lic, i, now, false)
			if err != nil {
				return rt.unavailable(ctx, lic, err)
			}
			d.Pinned, d.PinChanged = pin.Version, created
			if pin.Version == name {
				return nil
			}
		default:
			return rt.unavailable(ctx, lic, err)
		}
	}
	if rt.allowOverride != nil && rt.allowOverride(r, lic, pin.Version, name) {
		d.Override = true
		return nil
	}
	return &decisionError{cause: ErrNotEnabled, problem: problemNotEnabled(name, pin.Version)}
}

// currentPin returns the licensee's pin, from the cache when allowed, creating it on first use.
func (rt *Router) currentPin(ctx context.Context, lic string, i int, now time.Time, useCache bool) (pin Pin, cached, created bool, err error) {
	if useCache {
		if p, ok := rt.cache.get(lic, now); ok {
			return p, true, false, nil
		}
	}
	pin, err = rt.pins.Get(ctx, lic)
	if errors.Is(err, ErrNotPinned) {
		first := rt.firstPin(i, now)
		pin, created, err = rt.pins.SetIfAbsent(ctx, lic, first, now)
		if err == nil && created {
			rt.log.InfoContext(ctx, "versioning: pinned a licensee on first use", "licensee", lic, "version", first)
		}
	}
	if err != nil {
		return Pin{}, false, false, err
	}
	rt.cache.put(lic, pin, now)
	return pin, false, created, nil
}

func (rt *Router) firstPin(i int, now time.Time) string {
	if rt.firstUse == PinRequested && !rt.reg.versions[i].IsDeprecated(now) {
		return rt.reg.versions[i].Name
	}
	// The requested version is released, so some version is.
	v, _ := rt.reg.NewestReleased(now)
	return v.Name
}

// pinLapsed reports whether a pin no longer binds: its version is sunset or no longer registered.
func (rt *Router) pinLapsed(pinned string, now time.Time) bool {
	j, ok := rt.reg.index[pinned]
	return !ok || rt.reg.versions[j].IsSunset(now)
}

// newer reports whether version a has a higher number than b.
func (rt *Router) newer(a, b string) bool {
	na, _ := parseName(a)
	nb, ok := parseName(b)
	return !ok || na > nb
}

func (rt *Router) unavailable(ctx context.Context, lic string, err error) error {
	rt.log.ErrorContext(ctx, "versioning: pin store failed", "licensee", lic, "error", err)
	return &decisionError{cause: fmt.Errorf("%w: %w", ErrPinUnavailable, err), problem: problemPinUnavailable(rt.retryAfter)}
}

// pinCache keeps recently read pins. A nil *pinCache caches nothing.
type pinCache struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[string]cachedPin
}

type cachedPin struct {
	pin     Pin
	expires time.Time
}

func newPinCache(ttl time.Duration, max int) *pinCache {
	return &pinCache{ttl: ttl, max: max, m: make(map[string]cachedPin)}
}

func (c *pinCache) get(lic string, now time.Time) (Pin, bool) {
	if c == nil {
		return Pin{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[lic]
	if !ok {
		return Pin{}, false
	}
	if !now.Before(e.expires) {
		delete(c.m, lic)
		return Pin{}, false
	}
	return e.pin, true
}

func (c *pinCache) put(lic string, p Pin, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[lic]; !ok && len(c.m) >= c.max {
		// Full: drop an arbitrary entry (map order is random). A miss only costs a store read.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[lic] = cachedPin{pin: p, expires: now.Add(c.ttl)}
}

func (c *pinCache) drop(lic string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, lic)
	c.mu.Unlock()
}
