package seal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/seal"
)

// sealTestKey returns a key with a fixed secret derived from id, so that fuzz corpus files and
// failures are reproducible.
func sealTestKey(id uint32) seal.Key {
	secret := make([]byte, seal.SecretSize)
	for i := range secret {
		secret[i] = byte(id) + byte(i)
	}
	return seal.Key{ID: id, Secret: secret}
}

func newTestRing(t testing.TB, keys ...seal.Key) *seal.Ring {
	t.Helper()
	s, err := seal.NewRing(keys...)
	require.NoError(t, err)
	return s
}

func TestSealRoundTrip(t *testing.T) {
	s := newTestRing(t, sealTestKey(7))
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	for _, tc := range []struct {
		name      string
		plaintext []byte
		aad       []byte
	}{
		{"empty", nil, []byte("scope\x00key")},
		{"empty aad", []byte(`{"api_key":"sk_live_123"}`), nil},
		{"small", []byte(`{"secret":"whsec_abc"}`), []byte("scope\x00key")},
		{"1 MiB", big, []byte("scope\x00key")},
		{"long aad", []byte("body"), bytes.Repeat([]byte("a"), 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sealed := s.Seal(nil, tc.plaintext, tc.aad)
			require.Len(t, sealed, len(tc.plaintext)+seal.Overhead)
			require.Equal(t, byte(1), sealed[0], "version")
			require.Equal(t, uint32(7), binary.BigEndian.Uint32(sealed[1:5]), "key ID")
			if len(tc.plaintext) >= 8 {
				require.False(t, bytes.Contains(sealed, tc.plaintext[:8]), "plaintext visible in the blob")
			}

			got, err := s.Open(nil, sealed, tc.aad)
			require.NoError(t, err)
			require.Equal(t, len(tc.plaintext), len(got))
			require.True(t, bytes.Equal(tc.plaintext, got))
		})
	}
}

func TestSealAppendsToDst(t *testing.T) {
	s := newTestRing(t, sealTestKey(1))
	plaintext, aad := []byte("the body"), []byte("aad")

	t.Run("Seal", func(t *testing.T) {
		for _, extra := range []int{0, 100} { // without and with spare capacity
			dst := append(make([]byte, 0, 6+extra), "prefix"...)
			sealed := s.Seal(dst, plaintext, aad)
			require.Equal(t, "prefix", string(sealed[:6]))
			got, err := s.Open(nil, sealed[6:], aad)
			require.NoError(t, err)
			require.Equal(t, plaintext, got)
		}
	})
	t.Run("aad in dst's spare capacity", func(t *testing.T) {
		buf := make([]byte, 0, 256)
		aadInBuf := append(buf[:0], "scope\x00key"...)
		sealed := s.Seal(buf[:0], plaintext, aadInBuf)
		got, err := s.Open(nil, sealed, []byte("scope\x00key"))
		require.NoError(t, err)
		require.Equal(t, plaintext, got)
	})
	t.Run("Open", func(t *testing.T) {
		sealed := s.Seal(nil, plaintext, aad)
		for _, extra := range []int{0, 100} {
			dst := append(make([]byte, 0, 6+extra), "prefix"...)
			got, err := s.Open(dst, sealed, aad)
			require.NoError(t, err)
			require.Equal(t, "prefixthe body", string(got))
		}
	})
}

// sealRaceEnabled reports whether the test binary was built with -race, under which sync.Pool drops
// items on purpose and allocation counts mean nothing.
func sealRaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func TestSealAllocations(t *testing.T) {
	if sealRaceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	s := newTestRing(t, sealTestKey(1))
	plaintext := make([]byte, 256)
	aad := []byte(strings.Repeat("s", 64) + "\x00" + strings.Repeat("k", 255))
	sealed := s.Seal(nil, plaintext, aad)
	buf := make([]byte, 0, len(sealed))

	for _, tc := range []struct {
		name string
		want float64
		f    func()
	}{
		{"Seal into room", 0, func() { s.Seal(buf[:0], plaintext, aad) }},
		{"Seal into nil", 1, func() { s.Seal(nil, plaintext, aad) }},
		{"Open into room", 0, func() { _, _ = s.Open(buf[:0], sealed, aad) }},
		{"Open into nil", 1, func() { _, _ = s.Open(nil, sealed, aad) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, testing.AllocsPerRun(100, tc.f))
		})
	}
}

func TestSealRotation(t *testing.T) {
	oldKey, newKey := sealTestKey(1), sealTestKey(2)
	oldRing := newTestRing(t, oldKey)
	ring := newTestRing(t, newKey, oldKey)
	newOnly := newTestRing(t, newKey)
	aad := []byte("scope\x00key")

	byOld := oldRing.Seal(nil, []byte("sealed before rotation"), aad)
	got, err := ring.Open(nil, byOld, aad)
	require.NoError(t, err)
	require.Equal(t, "sealed before rotation", string(got))

	byRing := ring.Seal(nil, []byte("sealed after rotation"), aad)
	require.Equal(t, uint32(2), binary.BigEndian.Uint32(byRing[1:5]), "the ring seals with its first key")
	got, err = newOnly.Open(nil, byRing, aad)
	require.NoError(t, err)
	require.Equal(t, "sealed after rotation", string(got))

	// The old key retired: its blobs no longer open, and the error says which key is missing.
	got, err = newOnly.Open(nil, byOld, aad)
	require.ErrorIs(t, err, seal.ErrUnknownKey)
	require.NotErrorIs(t, err, seal.ErrCorrupt)
	require.Contains(t, err.Error(), "key ID 1")
	require.Nil(t, got)

	// Rolled back to a binary that only knows the old key.
	_, err = oldRing.Open(nil, byRing, aad)
	require.ErrorIs(t, err, seal.ErrUnknownKey)
	require.Contains(t, err.Error(), "key ID 2")
}

func TestSealBindsAAD(t *testing.T) {
	s := newTestRing(t, sealTestKey(1))
	sealed := s.Seal(nil, []byte("body"), []byte("tenant-1\x00k1"))
	for _, tc := range []struct {
		name string
		aad  []byte
	}{
		{"other key", []byte("tenant-1\x00k2")},
		{"other scope", []byte("tenant-2\x00k1")},
		{"shifted separator", []byte("tenant-1k\x001")},
		{"empty", nil},
		{"longer", []byte("tenant-1\x00k1\x00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Open(nil, sealed, tc.aad)
			require.ErrorIs(t, err, seal.ErrCorrupt)
			require.Nil(t, got)
		})
	}
}

// TestSealAuthenticatesKeyID points a blob at another key of the same ring: the key ID is bound to
// the ciphertext, so this fails as corruption rather than decrypting to garbage.
func TestSealAuthenticatesKeyID(t *testing.T) {
	s := newTestRing(t, sealTestKey(1), sealTestKey(2))
	sealed := s.Seal(nil, []byte("body"), nil)
	binary.BigEndian.PutUint32(sealed[1:5], 2)
	_, err := s.Open(nil, sealed, nil)
	require.ErrorIs(t, err, seal.ErrCorrupt)
}

func TestOpenRejectsEveryBitFlip(t *testing.T) {
	// Keys 1 and 3 differ from the sealing key 2 by one bit of the ID, so some flips land on a key of
	// the ring and must still fail.
	s := newTestRing(t, sealTestKey(2), sealTestKey(3), sealTestKey(6))
	aad := []byte("scope\x00key")
	sealed := s.Seal(nil, []byte(`{"api_key":"sk_live_abc"}`), aad)
	for i := range len(sealed) * 8 {
		tampered := bytes.Clone(sealed)
		tampered[i/8] ^= 1 << (i % 8)
		got, err := s.Open(nil, tampered, aad)
		require.Error(t, err, "bit %d", i)
		require.Nil(t, got, "bit %d", i)
		if i/8 >= 1 && i/8 < 5 {
			require.True(t, errors.Is(err, seal.ErrCorrupt) || errors.Is(err, seal.ErrUnknownKey), "bit %d: %v", i, err)
		} else {
			require.ErrorIs(t, err, seal.ErrCorrupt, "bit %d", i)
		}
	}
}

func TestOpenRejectsTruncation(t *testing.T) {
	s := newTestRing(t, sealTestKey(1))
	sealed := s.Seal(nil, []byte("a body of some length"), nil)
	for n := range len(sealed) {
		_, err := s.Open(nil, sealed[:n], nil)
		require.ErrorIs(t, err, seal.ErrCorrupt, "first %d bytes", n)
		// A suffix may start with a byte that reads as the version and go on with an unknown key ID.
		_, err = s.Open(nil, sealed[len(sealed)-n:], nil)
		require.True(t, errors.Is(err, seal.ErrCorrupt) || errors.Is(err, seal.ErrUnknownKey), "last %d bytes: %v", n, err)
	}
	_, err := s.Open(nil, append(bytes.Clone(sealed), 0), nil)
	require.ErrorIs(t, err, seal.ErrCorrupt, "a byte appended")
}

func TestOpenRejectsOtherVersionsAndKeyIDZero(t *testing.T) {
	s := newTestRing(t, sealTestKey(1))
	sealed := s.Seal(nil, []byte("body"), nil)
	for _, v := range []byte{0, 2, 0xff} {
		tampered := bytes.Clone(sealed)
		tampered[0] = v
		_, err := s.Open(nil, tampered, nil)
		require.ErrorIs(t, err, seal.ErrCorrupt, "version %d", v)
	}
	tampered := bytes.Clone(sealed)
	binary.BigEndian.PutUint32(tampered[1:5], 0)
	_, err := s.Open(nil, tampered, nil)
	require.ErrorIs(t, err, seal.ErrCorrupt)
}

func TestSealUsesFreshNonces(t *testing.T) {
	s := newTestRing(t, sealTestKey(1))
	a := s.Seal(nil, []byte("same body"), []byte("same aad"))
	b := s.Seal(nil, []byte("same body"), []byte("same aad"))
	require.NotEqual(t, a[5:17], b[5:17], "nonces")
	require.NotEqual(t, a[17:], b[17:], "ciphertexts")
}

// Seal has no error result, so a zero Ring's Seal panics rather than return plain text; Open has
// one and returns ErrNotBuilt; KeyID names no key.
func TestRingZeroValue(t *testing.T) {
	var s seal.Ring
	require.PanicsWithValue(t, "seal: Seal on a zero Ring; create it with NewRing", func() {
		s.Seal(nil, []byte("must not be stored in plain text"), nil)
	})
	var nilRing *seal.Ring
	require.Panics(t, func() { nilRing.Seal(nil, []byte("x"), nil) })
	for _, r := range []*seal.Ring{&s, nilRing} {
		_, err := r.Open(nil, make([]byte, 64), nil)
		require.ErrorIs(t, err, seal.ErrNotBuilt)
		require.EqualError(t, err, "seal: Ring not built with NewRing")
		require.Zero(t, r.KeyID())
	}
}

// TestKeyID: the ring's sealing key and a blob's key, which is how a rotation finds what to seal
// again; anything not in Seal's format names no key.
func TestKeyID(t *testing.T) {
	r := newTestRing(t, sealTestKey(2), sealTestKey(1))
	require.Equal(t, uint32(2), r.KeyID())
	blob := r.Seal(nil, []byte("whsec_x"), []byte("we_1"))
	require.Equal(t, uint32(2), seal.KeyID(blob))
	old := newTestRing(t, sealTestKey(1)).Seal(nil, nil, nil)
	require.Equal(t, uint32(1), seal.KeyID(old))
	for _, bad := range [][]byte{nil, []byte("whsec_plain"), blob[:seal.Overhead-1], append([]byte{2}, blob[1:]...)} {
		require.Zero(t, seal.KeyID(bad), "%q", bad)
	}
}

func TestNewRingErrors(t *testing.T) {
	k1, k2 := sealTestKey(1), sealTestKey(2)
	for _, tc := range []struct {
		name string
		keys []seal.Key
		want string
	}{
		{"no key", nil, "seal: NewRing: no key"},
		{"ID 0", []seal.Key{k1, {ID: 0, Secret: k2.Secret}}, "seal: NewRing: key 2 of 2 has ID 0"},
		{"nil secret", []seal.Key{{ID: 3}}, "seal: NewRing: key 1 (ID 3) has a 0-byte secret, want 32"},
		{"AES-128 secret", []seal.Key{{ID: 3, Secret: make([]byte, 16)}}, "seal: NewRing: key 1 (ID 3) has a 16-byte secret, want 32"},
		{"33-byte secret", []seal.Key{{ID: 3, Secret: make([]byte, 33)}}, "seal: NewRing: key 1 (ID 3) has a 33-byte secret, want 32"},
		{"duplicate ID", []seal.Key{k1, k2, {ID: 1, Secret: k2.Secret}}, "seal: NewRing: keys 1 and 3 share ID 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := seal.NewRing(tc.keys...)
			require.EqualError(t, err, tc.want)
			require.Nil(t, s)
		})
	}
}

func TestParseKey(t *testing.T) {
	k := sealTestKey(42)
	for _, tc := range []struct {
		name string
		text string
	}{
		{"Reveal", k.Reveal()},
		{"standard, padded", "42:" + base64.StdEncoding.EncodeToString(k.Secret)},
		{"standard, unpadded", "42:" + base64.RawStdEncoding.EncodeToString(k.Secret)},
		{"URL, padded", "42:" + base64.URLEncoding.EncodeToString(k.Secret)},
		{"URL, unpadded", "42:" + base64.RawURLEncoding.EncodeToString(k.Secret)},
		{"final newline", k.Reveal() + "\n"},
		{"leading zeros", "0042:" + base64.RawURLEncoding.EncodeToString(k.Secret)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := seal.ParseKey(tc.text)
			require.NoError(t, err)
			require.Equal(t, k, got)
		})
	}

	t.Run("max ID", func(t *testing.T) {
		got, err := seal.ParseKey("4294967295:" + base64.RawURLEncoding.EncodeToString(k.Secret))
		require.NoError(t, err)
		require.Equal(t, uint32(4294967295), got.ID)
	})
}

func TestParseKeyErrors(t *testing.T) {
	// The secret's text contains '-' and '_' under the URL alphabet and '+' and '/' under the
	// standard one, so alphabet confusion is exercised too.
	secret := bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:32]
	url := base64.RawURLEncoding.EncodeToString(secret)
	std := base64.StdEncoding.EncodeToString(secret)
	const badID = "seal: key: the ID before the colon (%d characters) must be a decimal number from 1 to 4294967295"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "", `seal: key: want "<id>:<base64 secret>", found no ":"`},
		{"secret only", url, `seal: key: want "<id>:<base64 secret>", found no ":"`},
		{"empty ID", ":" + url, fmt.Sprintf(badID, 0)},
		{"ID 0", "0:" + url, fmt.Sprintf(badID, 1)},
		{"negative ID", "-1:" + url, fmt.Sprintf(badID, 2)},
		{"ID over 32 bits", "4294967296:" + url, fmt.Sprintf(badID, 10)},
		{"parts swapped", url + ":7", fmt.Sprintf(badID, len(url))},
		{"empty secret", "7:", "seal: key 7: the secret after the colon is empty"},
		{"16-byte secret", "7:" + base64.StdEncoding.EncodeToString(secret[:16]), "seal: key 7: the secret after the colon decodes to 16 bytes, want 32"},
		{"48-byte secret", "7:" + base64.StdEncoding.EncodeToString(bytes.Repeat(secret, 2)[:48]), "seal: key 7: the secret after the colon decodes to 48 bytes, want 32"},
		{"mixed alphabets", "7:" + "+" + url[1:], "seal: key 7: the secret after the colon is not base64 (standard or URL alphabet): bad character or length at byte 1 of 43"},
		{"bad character", "7:" + url[:20] + "*" + url[21:], "seal: key 7: the secret after the colon is not base64 (standard or URL alphabet): bad character or length at byte 20 of 43"},
		{"cut short", "7:" + std[:41], "seal: key 7: the secret after the colon is not base64 (standard or URL alphabet): bad character or length at byte 40 of 41"},
		{"second colon", "7:" + url[:10] + ":" + url[10:], "seal: key 7: the secret after the colon is not base64 (standard or URL alphabet): bad character or length at byte 10 of 44"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := seal.ParseKey(tc.text)
			require.EqualError(t, err, tc.want)
			require.Zero(t, got)
			// No part that could be a secret is echoed, not even in part.
			for _, part := range strings.Split(tc.text, ":") {
				if len(part) >= 16 {
					require.NotContains(t, err.Error(), part[:8])
					require.NotContains(t, err.Error(), part[len(part)-8:])
				}
			}
		})
	}
}

func TestKeyTextHidesSecret(t *testing.T) {
	k := sealTestKey(9)
	secretText := strings.TrimPrefix(k.Reveal(), "9:")
	require.Equal(t, "9:"+base64.RawURLEncoding.EncodeToString(k.Secret), k.Reveal())
	for _, verb := range []string{"%v", "%+v", "%s", "%#v", "%q"} {
		for _, v := range []any{k, &k, []seal.Key{k}} {
			out := fmt.Sprintf(verb, v)
			require.NotContains(t, out, secretText, verb)
			require.NotContains(t, out, fmt.Sprint(k.Secret[:4]), verb)
			require.Contains(t, out, "redacted", verb)
		}
	}
	require.Equal(t, "9:<redacted>", k.String())
}

func TestGenerateKey(t *testing.T) {
	a, err := seal.GenerateKey(1)
	require.NoError(t, err)
	b, err := seal.GenerateKey(2)
	require.NoError(t, err)
	require.Equal(t, uint32(1), a.ID)
	require.Len(t, a.Secret, seal.SecretSize)
	require.NotEqual(t, a.Secret, b.Secret)

	parsed, err := seal.ParseKey(a.Reveal())
	require.NoError(t, err)
	require.Equal(t, a, parsed)
	newTestRing(t, a, b)

	_, err = seal.GenerateKey(0)
	require.EqualError(t, err, "seal: key ID must not be 0")
}

// TestRingConcurrent seals and opens from many goroutines at once; run it with -race.
func TestRingConcurrent(t *testing.T) {
	oldKey := sealTestKey(1)
	s := newTestRing(t, sealTestKey(2), oldKey)
	byOld := newTestRing(t, oldKey).Seal(nil, []byte("old body"), []byte("old"))

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			var buf []byte
			for i := range 200 {
				body := fmt.Appendf(nil, "body %d/%d", g, i)
				aad := fmt.Appendf(nil, "scope-%d\x00key-%d", g, i)
				buf = s.Seal(buf[:0], body, aad)
				got, err := s.Open(nil, buf, aad)
				if err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("goroutine %d, round %d: %q, %v", g, i, got, err)
					return
				}
				if got, err := s.Open(nil, byOld, []byte("old")); err != nil || string(got) != "old body" {
					errs <- fmt.Errorf("goroutine %d, round %d: old blob: %q, %v", g, i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzOpen checks that Open never panics and fails only with its two errors on arbitrary input, and
// that whatever is sealed opens again.
func FuzzOpen(f *testing.F) {
	s := newTestRing(f, sealTestKey(1), sealTestKey(2))
	aad := []byte("scope\x00key")
	f.Add(s.Seal(nil, []byte(`{"api_key":"sk_live_abc"}`), aad), aad)
	f.Add(s.Seal(nil, nil, nil), []byte{})
	f.Add(make([]byte, seal.Overhead), aad)
	f.Add([]byte{1, 0, 0, 0, 9}, aad)
	f.Fuzz(func(t *testing.T, data, aad []byte) {
		got, err := s.Open(nil, data, aad)
		switch {
		case err == nil:
			require.Len(t, got, len(data)-seal.Overhead)
		case errors.Is(err, seal.ErrCorrupt), errors.Is(err, seal.ErrUnknownKey):
			require.Nil(t, got)
		default:
			t.Fatalf("Open: unexpected error %v", err)
		}

		sealed := s.Seal([]byte("prefix"), data, aad)
		require.Equal(t, "prefix", string(sealed[:6]))
		opened, err := s.Open(nil, sealed[6:], aad)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, opened))
	})
}

func ExampleRing() {
	// In production the keys come from configuration, e.g. ParseKey(os.Getenv("SEAL_KEY")).
	oldKey, _ := seal.GenerateKey(1)
	newKey, _ := seal.GenerateKey(2)
	aad := []byte("tenant-1\x00order-42") // the record's scope and Idempotency-Key

	before, _ := seal.NewRing(oldKey)
	sealed := before.Seal(nil, []byte(`{"api_key":"sk_live_123"}`), aad)

	// Rotated: the new key seals, the old one still opens what it sealed.
	rotated, _ := seal.NewRing(newKey, oldKey)
	body, err := rotated.Open(nil, sealed, aad)
	fmt.Println(string(body), err)

	// A sealed body copied to another record does not open.
	_, err = rotated.Open(nil, sealed, []byte("tenant-1\x00order-43"))
	fmt.Println(err)

	// After the old key is dropped, its records no longer open.
	retired, _ := seal.NewRing(newKey)
	_, err = retired.Open(nil, sealed, aad)
	fmt.Println(err)
	// Output:
	// {"api_key":"sk_live_123"} <nil>
	// seal: sealed data is corrupt or was sealed with other associated data
	// seal: sealed with a key that is not in the ring (key ID 1)
}

func ExampleParseKey() {
	// A key pasted with its parts swapped: the error locates the fault without echoing the secret.
	_, err := seal.ParseKey("q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA:1")
	fmt.Println(err)
	// Output:
	// seal: key: the ID before the colon (43 characters) must be a decimal number from 1 to 4294967295
}
