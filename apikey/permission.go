package apikey

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/apierror"
)

// CodePermissionDenied is the code of the 403 Require writes for a key that lacks the route's
// permission.
const CodePermissionDenied = "permission_denied"

// ErrInvalidPermission: a permission is not "<resource>:read" or "<resource>:write", or is not one
// the service declared (IssuerOptions.Permissions).
var ErrInvalidPermission = errors.New("apikey: invalid permission")

// MaxPermissions bounds how many permissions one restricted key carries.
const MaxPermissions = 64

// checkPermission reports whether p is "<resource>:read" or "<resource>:write", the resource 1 to 64
// bytes of lowercase letters, digits and underscores, starting with a letter. The error quotes p only
// when it is short and printable.
func checkPermission(p string) error {
	resource, action, ok := strings.Cut(p, ":")
	if !ok || (action != "read" && action != "write") || !validResource(resource) {
		return fmt.Errorf("%w: %s is not <resource>:read or <resource>:write", ErrInvalidPermission, quoteShort(p))
	}
	return nil
}

func validResource(r string) bool {
	if r == "" || len(r) > 64 || r[0] < 'a' || r[0] > 'z' {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// quoteShort quotes s for a message when it is at most 80 bytes of printable ASCII, and describes it
// otherwise: a value a client sent is not echoed at length.
func quoteShort(s string) string {
	if len(s) > 80 {
		return "the value"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "the value"
		}
	}
	return fmt.Sprintf("%q", s)
}

// grants reports whether a key holding perms has p: the full key (nil perms) has every permission,
// and "<resource>:write" includes "<resource>:read".
func grants(perms []string, p string) bool {
	if perms == nil {
		return true
	}
	if slices.Contains(perms, p) {
		return true
	}
	if resource, ok := strings.CutSuffix(p, ":read"); ok {
		return slices.Contains(perms, resource+":write")
	}
	return false
}

// Allows reports whether the principal's key has the permission p: a full key has every one, and
// "<resource>:write" includes "<resource>:read".
func (p Principal) Allows(permission string) bool {
	return p.Valid() && grants(p.Permissions, permission)
}

// covers reports whether a key holding perms may hand out a key holding want: a full key may hand
// out anything, a restricted one only permissions it has, never the full key.
func covers(perms, want []string) bool {
	if perms == nil {
		return true
	}
	if want == nil {
		return false
	}
	for _, p := range want {
		if !grants(perms, p) {
			return false
		}
	}
	return true
}

// Require returns middleware that lets a request through to next only when its key has permission
// ("orders:write": see Principal.Allows), and answers it otherwise with a 403 permission_denied
// located at the Authorization header, naming the permission the route requires. It goes next to
// the route, behind the Authenticator's Handler:
//
//	mux.Handle("POST /v1/orders", auth.Require("orders:write", createOrder))
//
// A request without a principal is a wiring mistake (Require runs before the Authenticator) and gets
// the opaque 500, as does every request when permission is not "<resource>:read" or
// "<resource>:write" — a mistake the route's first test shows.
func (a *Authenticator) Require(permission string, next http.Handler) http.Handler {
	var wr apierror.Writer
	if a != nil {
		wr = a.writer
	}
	if err := checkPermission(permission); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wr.Write(w, r, err) })
	}
	detail := "this API key lacks the permission " + permission + " that this route requires: use a key that has it, or create one with it"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := FromContext(r.Context())
		switch {
		case !ok:
			wr.Write(w, r, ErrNoPrincipal)
		case !grants(p.Permissions, permission):
			wr.Write(w, r, apierror.Forbidden(CodePermissionDenied, detail,
				apierror.Header(HeaderAuthorization, CodePermissionDenied, detail)).With("required_permission", permission))
		default:
			next.ServeHTTP(w, r)
		}
	})
}
