package ssrf_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/svcplatform/conventions/ssrf"
)

// Registration refuses what a delivery must never reach, with a code for the API problem and a
// detail for the customer.
func ExampleURLPolicy_Check() {
	var p ssrf.URLPolicy // https only, default address guard
	for _, u := range []string{
		"https://hooks.example.com/orders?token=abc",
		"http://hooks.example.com/orders",
		"https://169.254.169.254/latest/meta-data/",
		"https://0x7f.1/",
		"https://[::ffff:127.0.0.1]/",
		"https://metadata.google.internal/",
		"https://user:secret@hooks.example.com/",
	} {
		var ue *ssrf.URLError
		if err := p.Check(u); errors.As(err, &ue) {
			fmt.Printf("%s: %s\n", ue.Code, ue.Detail)
		} else {
			fmt.Println("accepted")
		}
	}
	// Output:
	// accepted
	// scheme_not_allowed: must use https
	// host_blocked: must not point at a link-local address
	// host_blocked: must not point at a loopback address
	// host_blocked: must not point at a loopback address
	// host_blocked: must not use a host under .internal, which is for local use
	// url_has_userinfo: must not contain a user name or password; authenticate with the signature
}

// The delivery client checks the address it connects to, after DNS resolution. A test server on
// loopback is out of reach until the guard allows loopback.
func ExampleNewClient() {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()

	_, err := ssrf.NewClient(nil).Get(srv.URL)
	var blocked *ssrf.BlockedError
	fmt.Println(errors.Is(err, ssrf.ErrBlocked), errors.As(err, &blocked) && blocked.Class == "loopback")

	tests := &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	resp, err := ssrf.NewClient(tests).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// true true
	// 200 OK
}
