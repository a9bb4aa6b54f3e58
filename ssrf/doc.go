// Package ssrf keeps requests to URLs that customers type in — webhook endpoints above all — away
// from the service's own network. Without it 169.254.169.254, localhost:6379 or 10.0.0.0/8 would
// receive the service's POSTs (server-side request forgery).
//
//	// At registration: a located error the customer can act on.
//	var policy ssrf.URLPolicy // https only, the default guard
//	if err := policy.Check(endpointURL); err != nil {
//		var ue *ssrf.URLError
//		if errors.As(err, &ue) {
//			return apierror.Invalid(apierror.Body("/url", ue.Code, ue.Detail))
//		}
//	}
//
//	// At every request: dial only public unicast addresses, follow no redirect.
//	client := ssrf.NewClient(nil)
//
// There are two lines of defence. URLPolicy.Check refuses a bad URL at registration; it cannot see
// what a name will resolve to. Guard refuses at dial time, on the address the kernel is about to
// connect to, after DNS resolution: that is the check that counts, because a name may resolve to a
// public address when it is registered and to 127.0.0.1 when it is requested (DNS rebinding), and
// names like 127.0.0.1.nip.io resolve to loopback on purpose. A Guard's allow-lists open chosen
// addresses, ports or names (a sandbox, tests); AllowListed tells a caller that a connection reached
// one of them, so that it does not show the answer of its own network to a customer.
//
// The webhook dispatcher (package webhook/producer) delivers through NewClient unless given another
// client.
package ssrf
