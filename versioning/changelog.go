package versioning

import (
	"net/http"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// changelogList is the changelog endpoint's body: the released versions, newest first.
type changelogList struct {
	Object string             `json:"object"` // always "list"
	Data   []changelogVersion `json:"data"`
}

// changelogVersion is one version in the changelog, with the changes it introduced.
type changelogVersion struct {
	Object     string            `json:"object"` // always "api_version"
	Version    string            `json:"version"`
	Released   int64             `json:"released,omitempty"` // Unix seconds; each left out when not set
	Deprecated int64             `json:"deprecated,omitempty"`
	Sunset     int64             `json:"sunset,omitempty"`
	Changes    []changelogChange `json:"changes"` // in definition order; [] for the oldest version
}

// changelogChange is one Change as the changelog shows it.
type changelogChange struct {
	Name        string `json:"name"`
	Resource    string `json:"resource,omitempty"` // the object type the change reshapes (Change.Object); left out when it is not scoped to one
	Description string `json:"description"`
}

// ChangelogHandler returns the API's changelog endpoint, to mount behind the router (for example at
// "/{version}/changelog"): every version released at the time of the request, sunset ones
// included, newest first, each with its lifecycle dates and the changes it introduced, read from
// the registry's Version and Change definitions themselves (Name, Object, Description, in the order
// they were registered), so that the changelog cannot drift from what the router does:
//
//	GET /v2/changelog → 200
//	{"object":"list","data":[
//	  {"object":"api_version","version":"v2","released":1759276800,"changes":[
//	    {"name":"order_side_renamed","resource":"order","description":"An order's direction is called side."}]},
//	  {"object":"api_version","version":"v1","released":1735689600,"deprecated":1767225600,"sunset":1782864000,"changes":[]}]}
//
// Dates are Unix seconds, each left out when the version has none; a change's resource (its Object)
// is left out when the change is not scoped to one. The body is the same on every version: the
// router does not reshape it for older versions, whose changes are for the API's resources, not for
// this list. It answers GET and HEAD; other methods get 405 with Allow.
func (rt *Router) ChangelogHandler() http.Handler {
	if rt == nil || rt.reg == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, errZeroRouter) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rt.writer.Write(w, r, apierror.MethodNotAllowed(r.Method, http.MethodGet, http.MethodHead))
			return
		}
		unshaped(w)
		rt.writer.WriteJSON(w, r, http.StatusOK, rt.changelog(rt.now()))
	})
}

// changelog lists the versions released at now, newest first.
func (rt *Router) changelog(now time.Time) changelogList {
	vs := rt.reg.Versions() // oldest first
	out := changelogList{Object: "list", Data: make([]changelogVersion, 0, len(vs))}
	for i := len(vs) - 1; i >= 0; i-- {
		v := &vs[i]
		if !v.IsReleased(now) {
			continue
		}
		changes := rt.reg.Changes(v.Name) // in registration order
		cv := changelogVersion{Object: "api_version", Version: v.Name, Released: unixOrZero(v.Released),
			Deprecated: unixOrZero(v.Deprecated), Sunset: unixOrZero(v.Sunset),
			Changes: make([]changelogChange, 0, len(changes))}
		for _, c := range changes {
			cv.Changes = append(cv.Changes, changelogChange{Name: c.Name, Resource: c.Object, Description: c.Description})
		}
		out.Data = append(out.Data, cv)
	}
	return out
}

// unixOrZero is t in Unix seconds, or 0 (left out of the JSON) for the zero time.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// unshaped tells the router's shaping writer, when w is or wraps one, to pass the response through
// as it is: a body that is the same in every version.
func unshaped(w http.ResponseWriter) {
	for {
		switch x := w.(type) {
		case *shapingWriter:
			x.verbatim = true
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}
