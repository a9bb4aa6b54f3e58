package pgstore

import (
	"crypto/rand"
	"encoding/binary"
)

// randomUint63 returns a random integer in [1, 2^63): the ID of a delivery attempt, which fits a
// signed 64-bit column and, unlike the table's counter, tells no tenant how many attempts the others
// made. It is written here rather than imported from the root module's internal/, which a nested
// module must not import (it would tie pgstore to one commit of the root module).
func randomUint63() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead.
		if n := binary.BigEndian.Uint64(b[:]) >> 1; n != 0 {
			return n
		}
	}
}
