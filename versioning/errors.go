package versioning

import (
	"errors"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Problem codes the router writes. Those of the router's Handler are located at the path parameter
// "version"; those of the pin endpoint that refuse the version asked for, at the body member /version.
const (
	// CodeVersionUnknown: 404, the first path segment names no version that is answering (not a
	// version name, not registered, or not released yet). The problem lists the supported versions
	// in the extension member "supported_versions".
	CodeVersionUnknown = "version_unknown"
	// CodeVersionSunset: 410, the version was sunset. The problem names the successor
	// ("successor_version") and lists the supported versions.
	CodeVersionSunset = "version_sunset"
	// CodeVersionNotEnabled: 403, the licensee is pinned to another version, which the problem names
	// in "pinned_version".
	CodeVersionNotEnabled = "version_not_enabled"
	// CodePinUnavailable: 503 with Retry-After, the PinStore failed; the request was not served.
	CodePinUnavailable = "version_pin_unavailable"
	// CodeVersionDowngrade: 400 from the pin endpoint, an upgrade to an older version was asked for.
	CodeVersionDowngrade = "version_downgrade"
	// CodeLicenseeRequired: 401 from the pin endpoint, the request has no licensee.
	CodeLicenseeRequired = "licensee_required"
	// CodeVersionUpgradeFinal: 409 from the pin endpoint, located at the body member /version: the
	// version asked for is the one the pin was upgraded from, but the rollback window
	// (Options.RollbackWindow) has closed, so the upgrade is final. The detail says since when.
	CodeVersionUpgradeFinal = "version_upgrade_final"
)

// ParamVersion is the name problems use to locate the version path segment.
const ParamVersion = "version"

// Extension members of the router's problems.
const (
	MemberSupportedVersions = "supported_versions"
	MemberPinnedVersion     = "pinned_version"
	MemberSuccessorVersion  = "successor_version"
)

// ErrNotBuilt: a Registry or Router used without its constructor (NewRegistry, New). The errors their
// methods return match it with errors.Is and name the type; a Router's Handler and PinHandler
// answer the opaque 500.
var ErrNotBuilt = errors.New("versioning: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroRegistry error = &notBuiltError{"versioning: Registry not built with NewRegistry"}
	errZeroRouter   error = &notBuiltError{"versioning: Router not built with New"}
)

// Errors of registry construction. NewRegistry wraps one of them with the offending version or change.
var (
	ErrNoVersions         = errors.New("versioning: a registry needs at least one version")
	ErrInvalidName        = errors.New("versioning: a version name must be v followed by a number without leading zeros")
	ErrDuplicateVersion   = errors.New("versioning: version registered twice")
	ErrInvalidLifecycle   = errors.New("versioning: invalid lifecycle dates")
	ErrInvalidSuccessor   = errors.New("versioning: invalid successor")
	ErrInvalidChange      = errors.New("versioning: invalid change")
	ErrNoPath             = errors.New("versioning: no chain of changes from the newest version")
	ErrUnknownVersion     = errors.New("versioning: unknown version")
	ErrTransform          = errors.New("versioning: transform failed")
	ErrResponseTooLarge   = errors.New("versioning: response too large to transform")
	ErrHijackWhileShaping = errors.New("versioning: cannot hijack a response that is being transformed")
)

// Errors of request decisions (Router.Decide) and pin changes. Each error Decide returns wraps one of
// them and the *apierror.Error to answer with, so apierror.Write renders it directly.
var (
	// ErrVersionSunset: the version no longer answers.
	ErrVersionSunset = errors.New("versioning: version is sunset")
	// ErrNotEnabled: the licensee is pinned to another version.
	ErrNotEnabled = errors.New("versioning: version is not enabled for this licensee")
	// ErrPinUnavailable: the PinStore failed.
	ErrPinUnavailable = errors.New("versioning: pin store unavailable")
	// ErrDowngrade: Upgrade was asked to move a pin to an older version.
	ErrDowngrade = errors.New("versioning: an upgrade cannot move a pin to an older version")
	// ErrRollbackExpired: a rollback to the version a pin was upgraded from, asked for after the
	// rollback window (Options.RollbackWindow) closed; the upgrade is final. The error's message
	// says when it became final.
	ErrRollbackExpired = errors.New("versioning: the rollback window has closed; the upgrade is final")
	// ErrNoRollback: Rollback found no upgrade to undo: the pin never moved, or its last move was not
	// an upgrade (a rollback, say, which cannot be rolled back in turn).
	ErrNoRollback = errors.New("versioning: the pin's last move was not an upgrade; there is nothing to roll back")
	// ErrNoLicensee: the request carries no licensee, so it has no pin to read or change.
	ErrNoLicensee = errors.New("versioning: request has no licensee")
)

// Errors of a PinStore.
var (
	// ErrNotPinned: the licensee has no pin.
	ErrNotPinned = errors.New("versioning: licensee is not pinned")
	// ErrPinConflict: CompareAndSwap found another version than the one expected.
	ErrPinConflict = errors.New("versioning: pin changed concurrently")
	// ErrInvalidPin: a licensee, version name or list limit that the Router refuses before it calls
	// the PinStore (see PinStore); MemoryPinStore refuses them too.
	ErrInvalidPin = errors.New("versioning: invalid pin argument")
)

// decisionError carries both the condition (for errors.Is and logs) and the problem (for
// apierror.Write), like the other middleware of the library.
type decisionError struct {
	cause   error
	problem *apierror.Error
}

func (e *decisionError) Error() string   { return e.cause.Error() + ": " + e.problem.Detail }
func (e *decisionError) Unwrap() []error { return []error{e.cause, e.problem} }

// rollbackExpiredError is ErrRollbackExpired with the upgrade it concerns and when that became
// final, which the pin endpoint's 409 tells the client.
type rollbackExpiredError struct {
	from, to string    // the upgrade: from the older version to the newer
	final    time.Time // the end of its rollback window
}

func (e *rollbackExpiredError) Error() string {
	return "versioning: the rollback window has closed: the upgrade from " + e.from + " to " + e.to +
		" became final at " + e.final.UTC().Format(time.RFC3339)
}

func (e *rollbackExpiredError) Unwrap() error { return ErrRollbackExpired }

// Problems are built per request: an *apierror.Error is mutable and must not be shared.

func problemUnknown(segment string, supported []string) *apierror.Error {
	var detail string
	if segment == "" {
		detail = "the path must begin with a version segment such as /" + newestOf(supported) + "/"
	} else {
		detail = "version " + segment + " is not supported"
	}
	detail += "; supported versions: " + listOrNone(supported)
	return apierror.NotFound(CodeVersionUnknown, detail,
		apierror.Path(ParamVersion, CodeVersionUnknown, detail)).
		With(MemberSupportedVersions, supported)
}

func problemSunset(v Version, successor string, supported []string) *apierror.Error {
	detail := "version " + v.Name + " was sunset on " + v.Sunset.UTC().Format(time.RFC3339)
	if successor != "" {
		detail += "; use " + successor
	}
	p := apierror.Gone(CodeVersionSunset, detail, apierror.Path(ParamVersion, CodeVersionSunset, detail)).
		With(MemberSupportedVersions, supported)
	if successor != "" {
		p.With(MemberSuccessorVersion, successor)
	}
	return p
}

func problemNotEnabled(requested, pinned string) *apierror.Error {
	detail := "this licensee is pinned to version " + pinned + "; requests on " + requested +
		" are not enabled until the pin is upgraded"
	return apierror.Forbidden(CodeVersionNotEnabled, detail,
		apierror.Path(ParamVersion, CodeVersionNotEnabled, detail)).
		With(MemberPinnedVersion, pinned)
}

func problemPinUnavailable(retryAfter time.Duration) *apierror.Error {
	return apierror.Unavailable(retryAfter, CodePinUnavailable,
		"the licensee's version pin cannot be read right now; the request was not carried out, retry later")
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func newestOf(names []string) string {
	if len(names) == 0 {
		return "v1"
	}
	return names[len(names)-1]
}
