package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewKey(t *testing.T) {
	for _, env := range []Environment{Sandbox, Live} {
		t.Run(string(env), func(t *testing.T) {
			k, err := New(env)
			require.NoError(t, err)
			s := k.Reveal()
			require.True(t, strings.HasPrefix(s, "sk_"+string(env)+"_"), s)
			require.Len(t, s, len("sk_"+string(env)+"_")+40)
			parsed, err := Parse(s)
			require.NoError(t, err)
			require.Equal(t, env, parsed.Environment())
			require.Equal(t, KeyHash(sha256.Sum256([]byte(s))), parsed.Hash())
			require.Equal(t, k.Hash(), parsed.Hash())

			other, err := New(env)
			require.NoError(t, err)
			require.NotEqual(t, s, other.Reveal(), "two keys must differ")

			red := k.String()
			require.NotContains(t, red, s[len(s)-40:len(s)-4], "String must redact the key")
			require.Equal(t, red, fmt.Sprint(k))
			require.Equal(t, red, k.LogValue().String())
		})
	}
	_, err := New("test")
	require.ErrorIs(t, err, ErrInvalidEnvironment)
	_, err = New("")
	require.ErrorIs(t, err, ErrInvalidEnvironment)
}

func TestParse(t *testing.T) {
	sb, err := New(Sandbox)
	require.NoError(t, err)
	good := sb.Reveal()
	body := strings.TrimPrefix(good, "sk_sandbox_")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	// Swap the first two adjacent characters that differ: a transposition typo.
	i := 0
	for body[i] == body[i+1] {
		i++
	}
	swapped := "sk_sandbox_" + body[:i] + body[i+1:i+2] + body[i:i+1] + body[i+2:]
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"valid", good, nil},
		{"empty", "", ErrMalformed},
		{"prefix only", "sk_sandbox_", ErrMalformed},
		{"unknown environment", "sk_test_" + body, ErrMalformed},
		{"publishable-style prefix", "pk_sandbox_" + body, ErrMalformed},
		{"upper-case prefix", "SK_SANDBOX_" + body, ErrMalformed},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"one extra character", good + "a", ErrMalformed},
		{"trailing newline", good + "\n", ErrMalformed},
		{"leading space", " " + good, ErrMalformed},
		{"upper-case body", "sk_sandbox_" + strings.ToUpper(body), ErrMalformed},
		{"digit outside base32", "sk_sandbox_" + body[:10] + "1" + body[11:], ErrMalformed},
		{"multi-byte character", "sk_sandbox_" + body[:39] + "é", ErrMalformed},
		{"typo in the random part", flip(good, len("sk_sandbox_")+3), ErrChecksum},
		{"typo in the checksum", flip(good, len(good)-1), ErrChecksum},
		{"relabelled as live", "sk_live_" + body, ErrChecksum},
		{"swapped characters", swapped, ErrChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Parse(tc.in)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, Sandbox, k.Environment())
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, Key{}, k)
			require.NotContains(t, err.Error(), body[:20], "errors must not echo the key")
		})
	}
}

// Every single-character typo of a key is caught by the checksum (or the alphabet), before any lookup.
func TestParseCatchesEveryTypo(t *testing.T) {
	k, err := New(Live)
	require.NoError(t, err)
	s := k.Reveal()
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	for i := len("sk_live_"); i < len(s); i++ {
		for _, c := range []byte(alphabet) {
			if c == s[i] {
				continue
			}
			typo := s[:i] + string(c) + s[i+1:]
			_, err := Parse(typo)
			require.ErrorIs(t, err, ErrChecksum, "typo at %d not caught", i)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "…"},
		{"short", "…"},
		{"sk_live_abcdefghijklmnop", "sk_live_…mnop"},
		{"sk_sandbox_abcdefghijklmnop", "sk_sandbox_…mnop"},
		{"whsec_abcdefghijklmnop", "whsec_…mnop"},
		{"sk_live_abc", "sk_live_…"},
		{"some-other-secret-value", "…alue"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, redact(tc.in))
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, env := range []Environment{Sandbox, Live} {
		k, err := New(env)
		require.NoError(f, err)
		f.Add(k.Reveal())
	}
	f.Add("")
	f.Add("sk_sandbox_")
	f.Add("sk_live_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Add("sk_sandbox_\x00\xff")
	f.Add("Bearer sk_live_x")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			if len(s) >= 16 && strings.Contains(err.Error(), s) {
				t.Fatalf("error echoes the input: %v", err)
			}
			if k != (Key{}) {
				t.Fatalf("error with a non-zero key")
			}
			return
		}
		if k.Reveal() != s {
			t.Fatalf("parsed key differs from the input")
		}
		if !strings.HasPrefix(s, "sk_"+string(k.Environment())+"_") {
			t.Fatalf("environment %q does not match the prefix", k.Environment())
		}
		if strings.Contains(k.String(), s[len(s)-40:len(s)-4]) {
			t.Fatalf("String does not redact")
		}
		// Relabelling the key into the other environment must always fail the checksum.
		other := Live
		if k.Environment() == Live {
			other = Sandbox
		}
		if _, err := Parse("sk_" + string(other) + "_" + s[len("sk_"+string(k.Environment())+"_"):]); err == nil {
			t.Fatalf("relabelled key parsed")
		}
	})
}

// keyDecode is a hand-rolled base32 decoder; it must agree with encoding/base32 on every input.
func TestKeyDecodeMatchesBase32(t *testing.T) {
	for i := range 2000 {
		var raw [keyRandomBytes + keyChecksumBytes]byte
		for j := range raw {
			raw[j] = byte(i*31 + j*j*7 + i/3*j)
		}
		if i%2 == 1 {
			_, _ = rand.Read(raw[:])
		}
		enc := keyEncoding.EncodeToString(raw[:])
		require.Equal(t, raw, keyDecode(enc), enc)
	}
	require.Equal(t, [25]byte{}, keyDecode(strings.Repeat("a", 40)))
	all7 := keyDecode(strings.Repeat("7", 40))
	for _, b := range all7 {
		require.Equal(t, byte(0xff), b)
	}
}
