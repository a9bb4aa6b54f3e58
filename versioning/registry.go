package versioning

import (
	"bytes"
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Registry is the validated list of versions and of the changes between them. It is immutable
// after NewRegistry and safe for concurrent use. The zero value is not usable: it holds no version,
// so Compare, TransformResponse, TransformRequest and RenderEvent return an error that wraps
// ErrNotBuilt, Lookup and NewestReleased find nothing and Newest is the zero Version. A nil *Registry
// behaves the same.
type Registry struct {
	versions []Version       // ascending by number
	index    map[string]int  // name → position in versions
	changes  []Change        // as registered
	steps    [][]int         // steps[i]: indexes into changes of the changes versions[i] introduced
	shape    []shapeNeeds    // shape[i]: what serving versions[i] from the newest shape involves
	header   []versionHeader // precomputed response header values per version
}

// shapeNeeds says which transforms a version's chain from the newest contains.
type shapeNeeds struct {
	response, request bool
}

// versionHeader holds the header values that do not depend on the request, built once.
type versionHeader struct {
	deprecation string // Deprecation: @<unix>, "" when no deprecation is scheduled
	sunset      string // Sunset: <HTTP-date>, "" when no sunset is scheduled
	depLink     string // Link value with rel="deprecation", "" when none
}

// NewRegistry validates versions and changes and returns the registry. The rules, each reported as
// an error wrapping the named sentinel:
//   - at least one version (ErrNoVersions); names well-formed (ErrInvalidName) and unique
//     (ErrDuplicateVersion);
//   - times whole seconds; deprecation not before release; sunset not before deprecation, and a
//     sunset only with a deprecation; the newest version neither deprecated nor sunset, so exactly
//     one version is the newest and stays (ErrInvalidLifecycle);
//   - a successor that is registered and newer; none on the newest (ErrInvalidSuccessor);
//   - changes named in lowercase snake_case, uniquely, introduced by a registered version that is
//     not the oldest (ErrInvalidChange);
//   - every version older than the newest reachable from it: each step between two consecutive
//     versions has at least one change (ErrNoPath). A new version exists because something broke,
//     and the change says what; a step that needs no reshaping declares a change without functions.
//
// The slices are copied; versions may be given in any order.
func NewRegistry(versions []Version, changes []Change) (*Registry, error) {
	if len(versions) == 0 {
		return nil, ErrNoVersions
	}
	vs := slices.Clone(versions)
	for i := range vs {
		n, ok := parseName(vs[i].Name)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrInvalidName, vs[i].Name)
		}
		vs[i].num = n
	}
	slices.SortFunc(vs, func(a, b Version) int { return cmp.Compare(a.num, b.num) })
	reg := &Registry{versions: vs, index: make(map[string]int, len(vs))}
	for i, v := range vs {
		if _, dup := reg.index[v.Name]; dup {
			return nil, fmt.Errorf("%w: %s", ErrDuplicateVersion, v.Name)
		}
		reg.index[v.Name] = i
	}
	newest := len(vs) - 1
	for i := range vs {
		if err := checkLifecycle(vs[i], i == newest); err != nil {
			return nil, err
		}
		if err := reg.resolveSuccessor(i); err != nil {
			return nil, err
		}
	}
	if err := reg.addChanges(changes); err != nil {
		return nil, err
	}
	reg.header = make([]versionHeader, len(vs))
	for i, v := range vs {
		reg.header[i] = buildHeader(v)
	}
	return reg, nil
}

func checkLifecycle(v Version, newest bool) error {
	for _, t := range []struct {
		what string
		at   time.Time
	}{{"released", v.Released}, {"deprecated", v.Deprecated}, {"sunset", v.Sunset}} {
		if !t.at.IsZero() && t.at.Nanosecond() != 0 {
			return fmt.Errorf("%w: %s: %s time %s is not a whole second (the headers carry seconds)",
				ErrInvalidLifecycle, v.Name, t.what, t.at.Format(time.RFC3339Nano))
		}
	}
	switch {
	case !v.Deprecated.IsZero() && !v.Released.IsZero() && v.Deprecated.Before(v.Released):
		return fmt.Errorf("%w: %s: deprecated before it was released", ErrInvalidLifecycle, v.Name)
	case !v.Sunset.IsZero() && v.Deprecated.IsZero():
		return fmt.Errorf("%w: %s: a sunset needs a deprecation no later than it", ErrInvalidLifecycle, v.Name)
	case !v.Sunset.IsZero() && v.Sunset.Before(v.Deprecated):
		return fmt.Errorf("%w: %s: sunset before deprecation", ErrInvalidLifecycle, v.Name)
	case newest && (!v.Deprecated.IsZero() || !v.Sunset.IsZero()):
		return fmt.Errorf("%w: %s: the newest version cannot be deprecated or sunset; register its successor first",
			ErrInvalidLifecycle, v.Name)
	}
	return nil
}

func (reg *Registry) resolveSuccessor(i int) error {
	v := &reg.versions[i]
	if i == len(reg.versions)-1 {
		if v.Successor != "" {
			return fmt.Errorf("%w: %s is the newest version and cannot have a successor (%s)",
				ErrInvalidSuccessor, v.Name, v.Successor)
		}
		return nil
	}
	if v.Successor == "" {
		v.Successor = reg.versions[i+1].Name
		return nil
	}
	j, ok := reg.index[v.Successor]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s: successor %q is not registered", ErrInvalidSuccessor, v.Name, v.Successor)
	case j <= i:
		return fmt.Errorf("%w: %s: successor %s is not newer", ErrInvalidSuccessor, v.Name, v.Successor)
	}
	return nil
}

func (reg *Registry) addChanges(changes []Change) error {
	reg.changes = slices.Clone(changes)
	reg.steps = make([][]int, len(reg.versions))
	names := make(map[string]bool, len(changes))
	for ci, c := range reg.changes {
		if !snakeCase(c.Name) {
			return fmt.Errorf("%w: name %q must be lowercase snake_case", ErrInvalidChange, c.Name)
		}
		if names[c.Name] {
			return fmt.Errorf("%w: %s registered twice", ErrInvalidChange, c.Name)
		}
		names[c.Name] = true
		i, ok := reg.index[c.Version]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s: %w: %q", ErrInvalidChange, c.Name, ErrUnknownVersion, c.Version)
		case i == 0:
			return fmt.Errorf("%w: %s: introduced by %s, the oldest version, so there is no previous shape",
				ErrInvalidChange, c.Name, c.Version)
		}
		reg.steps[i] = append(reg.steps[i], ci)
	}
	n := len(reg.versions)
	reg.shape = make([]shapeNeeds, n)
	for i := n - 2; i >= 0; i-- {
		step := reg.steps[i+1]
		if len(step) == 0 {
			return fmt.Errorf("%w: %s cannot be served: %s introduces no change (declare one, even without functions)",
				ErrNoPath, reg.versions[i].Name, reg.versions[i+1].Name)
		}
		need := reg.shape[i+1]
		for _, ci := range step {
			c := &reg.changes[ci]
			need.response = need.response || c.shapesResponses()
			need.request = need.request || c.Request != nil
		}
		reg.shape[i] = need
	}
	return nil
}

func buildHeader(v Version) versionHeader {
	var h versionHeader
	if !v.Deprecated.IsZero() {
		h.deprecation = "@" + strconv.FormatInt(v.Deprecated.Unix(), 10)
		if v.DeprecationLink != "" {
			h.depLink = "<" + v.DeprecationLink + `>; rel="deprecation"; type="text/html"`
		}
	}
	if !v.Sunset.IsZero() {
		h.sunset = v.Sunset.UTC().Format(http.TimeFormat)
	}
	return h
}

// liveSuccessor is where a client of versions[i] should go at now: the first version along the
// successor chain that answers at now (released, not sunset), or else the newest newer version that
// does; "" when none does.
func (reg *Registry) liveSuccessor(i int, now time.Time) string {
	for name := reg.versions[i].Successor; name != ""; {
		j := reg.index[name]
		if reg.versions[j].IsSupported(now) {
			return name
		}
		name = reg.versions[j].Successor
	}
	if v, ok := reg.NewestReleased(now); ok && reg.index[v.Name] > i {
		return v.Name
	}
	return ""
}

func snakeCase(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') || (c == '_' && s[i-1] == '_') {
			return false
		}
	}
	return true
}

// Versions returns the registered versions, oldest first, with successors filled in.
func (reg *Registry) Versions() []Version {
	if reg == nil {
		return nil
	}
	return slices.Clone(reg.versions)
}

// Lookup returns the version with the given name.
func (reg *Registry) Lookup(name string) (Version, bool) {
	if reg == nil {
		return Version{}, false
	}
	i, ok := reg.index[name]
	if !ok {
		return Version{}, false
	}
	return reg.versions[i], true
}

// Newest returns the newest version: the one handlers produce. A zero Registry has none: its Newest
// is the zero Version.
func (reg *Registry) Newest() Version {
	if reg == nil || len(reg.versions) == 0 {
		return Version{}
	}
	return reg.versions[len(reg.versions)-1]
}

// NewestReleased returns the newest version released at now, or false when none is.
func (reg *Registry) NewestReleased(now time.Time) (Version, bool) {
	if reg == nil {
		return Version{}, false
	}
	for i := len(reg.versions) - 1; i >= 0; i-- {
		if v := reg.versions[i]; v.IsSupported(now) {
			return v, true
		}
	}
	return Version{}, false
}

// Supported returns the names of the versions that answer at now (released, not sunset), oldest first.
func (reg *Registry) Supported(now time.Time) []string {
	if reg == nil {
		return []string{}
	}
	out := make([]string, 0, len(reg.versions))
	for _, v := range reg.versions {
		if v.IsSupported(now) {
			out = append(out, v.Name)
		}
	}
	return out
}

// Changes returns the changes the named version introduced, in registration order; nil for an
// unknown version or one that introduced none.
func (reg *Registry) Changes(version string) []Change {
	if reg == nil {
		return nil
	}
	i, ok := reg.index[version]
	if !ok || len(reg.steps[i]) == 0 {
		return nil
	}
	out := make([]Change, 0, len(reg.steps[i]))
	for _, ci := range reg.steps[i] {
		out = append(out, reg.changes[ci])
	}
	return out
}

// AllChanges returns every registered change, in registration order.
func (reg *Registry) AllChanges() []Change {
	if reg == nil {
		return nil
	}
	return slices.Clone(reg.changes)
}

// Compare compares two registered versions by number: -1 when a is older than b, 0 when they are the
// same, +1 when a is newer. An unknown name is an error wrapping ErrUnknownVersion.
func (reg *Registry) Compare(a, b string) (int, error) {
	if reg == nil || reg.index == nil {
		return 0, errZeroRegistry
	}
	i, ok := reg.index[a]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownVersion, a)
	}
	j, ok := reg.index[b]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownVersion, b)
	}
	return cmp.Compare(i, j), nil
}

func (reg *Registry) lookupIndex(name string) (int, error) {
	if reg == nil || reg.index == nil {
		return 0, errZeroRegistry
	}
	i, ok := reg.index[name]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownVersion, name)
	}
	return i, nil
}

// TransformResponse turns a response body of the newest shape into the named version's shape by
// applying the chain of changes, newest first (within one version, in reverse registration order,
// like undoing migrations). Bodies that no change touches come back as they are. The output's keys
// are sorted (encoding/json); numbers keep every digit.
func (reg *Registry) TransformResponse(body []byte, version string) ([]byte, error) {
	to, err := reg.lookupIndex(version)
	if err != nil {
		return nil, err
	}
	return reg.transformResponse(body, to)
}

func (reg *Registry) transformResponse(body []byte, to int) ([]byte, error) {
	if !reg.shape[to].response || len(bytes.TrimSpace(body)) == 0 {
		return body, nil
	}
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("versioning: response: %w", err)
	}
	for s := len(reg.versions) - 1; s > to; s-- {
		step := reg.steps[s]
		for k := len(step) - 1; k >= 0; k-- {
			if err := reg.changes[step[k]].applyResponse(v); err != nil {
				return nil, err
			}
		}
	}
	return encodeJSON(v, body)
}

// TransformRequest turns a request body of the named version's shape into the newest shape by
// applying the changes' Request functions, oldest first (within one version, in registration
// order). Bodies that are not a JSON object, and bodies no change touches, come back as they are.
func (reg *Registry) TransformRequest(body []byte, version string) ([]byte, error) {
	from, err := reg.lookupIndex(version)
	if err != nil {
		return nil, err
	}
	return reg.transformRequest(body, from)
}

func (reg *Registry) transformRequest(body []byte, from int) ([]byte, error) {
	if !reg.shape[from].request {
		return body, nil
	}
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("versioning: request: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return body, nil
	}
	for s := from + 1; s < len(reg.versions); s++ {
		for _, ci := range reg.steps[s] {
			if err := reg.changes[ci].applyRequest(obj); err != nil {
				return nil, err
			}
		}
	}
	return encodeJSON(obj, body)
}

// RenderEvent turns a webhook event stored at ev.Version into the version to (normally the
// licensee's pin): each change between them applies its Event function and, when it is scoped to an
// Object, its Response function to the matching resources in the data. The result's Version is to.
//
// An empty to, or one equal to ev.Version, returns ev as it is. Events are never upgraded: when to
// is newer than ev.Version, ev comes back unchanged and its Version says which shape it has, so a
// consumer that reads api_version can tell. Unknown versions are errors wrapping ErrUnknownVersion.
func (reg *Registry) RenderEvent(ev EventShape, to string) (EventShape, error) {
	if to == "" || to == ev.Version {
		return ev, nil
	}
	from, err := reg.lookupIndex(ev.Version)
	if err != nil {
		return EventShape{}, fmt.Errorf("versioning: render event: stored at %w", err)
	}
	target, err := reg.lookupIndex(to)
	if err != nil {
		return EventShape{}, fmt.Errorf("versioning: render event: %w", err)
	}
	if target >= from {
		return ev, nil
	}
	out := EventShape{Version: to, Type: ev.Type, Data: ev.Data}
	needed := false
	for s := from; s > target && !needed; s-- {
		for _, ci := range reg.steps[s] {
			needed = needed || reg.changes[ci].shapesEvents()
		}
	}
	if !needed {
		return out, nil
	}
	p, err := decodePayload(ev.Type, ev.Data)
	if err != nil {
		return EventShape{}, fmt.Errorf("versioning: render event %s: %w", ev.Type, err)
	}
	for s := from; s > target; s-- {
		step := reg.steps[s]
		for k := len(step) - 1; k >= 0; k-- {
			if err := reg.changes[step[k]].applyEvent(p); err != nil {
				return EventShape{}, err
			}
		}
	}
	data, err := encodeJSON(p.Data, nil)
	if err != nil {
		return EventShape{}, err
	}
	out.Type, out.Data = p.Type, data
	return out, nil
}
