// Package examples holds runnable programs that wire the library together the way a product team
// would: a reference order server, a webhook consumer, a client and a one-command demo.
package examples
