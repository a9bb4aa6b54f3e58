package sandbox

import (
	"net/http"

	"github.com/svcplatform/conventions/apikey"
)

// InSandbox reports whether r was authenticated with a sandbox key (the principal the
// apikey.Authenticator put in its context is of apikey.Sandbox): the test for sandbox-only behaviour
// such as the versioning middleware's per-request version override. A request nobody authenticated
// is not in the sandbox.
func InSandbox(r *http.Request) bool {
	p, ok := apikey.FromContext(r.Context())
	return ok && p.Environment == apikey.Sandbox
}
