package apierror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/svcplatform/conventions/internal/strictjson"
)

// DefaultMaxBodyBytes caps a request body when DecodeOptions.MaxBytes is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DecodeOptions tune Decode. A nil *DecodeOptions and the zero value mean the defaults.
type DecodeOptions struct {
	// MaxBytes caps the body; zero means DefaultMaxBodyBytes. A larger body is a 413.
	MaxBytes int64
	// AllowUnknownFields accepts members the destination type does not have. By default they are a
	// 400 unknown_field, so that a misspelt optional field never passes silently.
	AllowUnknownFields bool
}

// Decode reads r's body as one JSON value into dst, strictly, and every failure is an *Error whose
// violation says where the input went wrong:
//
//   - the body must be sent as JSON: Content-Type application/json or application/<x>+json, with no
//     parameter but charset=utf-8 (RequireJSON); anything else, a non-empty body without a
//     Content-Type included, is 415 unsupported_media_type at header Content-Type, with Accept-Post
//     or Accept-Patch. An empty body is 400 body_missing whatever the headers say;
//   - the body is capped (413 beyond DecodeOptions.MaxBytes);
//   - a member the destination does not have is 400 unknown_field, and member names match exactly:
//     "ACCOUNT" is not "account" (encoding/json would take it);
//   - a member given twice is 400 duplicate_member (encoding/json would keep the last);
//   - a string that is not UTF-8, or holds an escaped lone surrogate, is 400 invalid_utf8
//     (encoding/json would replace it with U+FFFD);
//   - a value of the wrong type is located by JSON Pointer, array indices included; a syntax error by
//     byte offset; data after the value is 400 trailing_data.
//
// An error that is not an *Error means dst is not a valid destination: a programming error.
func Decode(r *http.Request, dst any, opts *DecodeOptions) error {
	limit := int64(DefaultMaxBodyBytes)
	if opts != nil && opts.MaxBytes > 0 {
		limit = opts.MaxBytes
	}
	if r.ContentLength > limit {
		return BodyTooLarge(limit)
	}
	if r.Body == nil || r.ContentLength == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return BodyTooLarge(mbe.Limit)
		}
		return Invalid(Body("", "body_unreadable", "the request body could not be read completely"))
	}
	if int64(len(data)) > limit {
		return BodyTooLarge(limit)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	if err := RequireJSON(r); err != nil {
		return err
	}
	return DecodeBytes(data, dst, opts)
}

// CodeUnsupportedMediaType is the code of a request body that is not sent as JSON.
const CodeUnsupportedMediaType = "unsupported_media_type"

// RequireJSON checks that r declares a JSON body: exactly one Content-Type, application/json or
// application/<x>+json (case-insensitive), whose only parameter, if any, is charset=utf-8. It returns
// nil or the 415 problem, located at header Content-Type, with Accept-Post: application/json for a
// POST and Accept-Patch: application/json for a PATCH (RFC 9110 §15.5.16). Decode calls it for a
// non-empty body; a handler that reads the body itself calls it before DecodeBytes.
//
// A missing Content-Type is refused too: a JSON media type means a browser cannot send the request
// cross-site as a CORS "simple request" (text/plain and form types are), and a body whose type is not
// declared is never guessed at.
func RequireJSON(r *http.Request) error {
	vals := r.Header.Values("Content-Type")
	var detail string
	switch {
	case len(vals) == 0 || strings.TrimSpace(vals[0]) == "":
		detail = "is required with a body: send Content-Type: application/json"
	case len(vals) > 1:
		detail = "send exactly one Content-Type header: application/json"
	default:
		mt, params, err := mime.ParseMediaType(vals[0])
		switch {
		case err != nil:
			detail = "is not a media type: send Content-Type: application/json"
		case mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")):
			detail = "must be application/json, not " + mt
		default:
			for k, v := range params {
				if k != "charset" {
					detail = "takes no parameter " + strconv.Quote(k) + ": send Content-Type: application/json"
				} else if !strings.EqualFold(v, "utf-8") {
					detail = "must be UTF-8: JSON is exchanged in UTF-8 only (RFC 8259 §8.1)"
				}
			}
		}
	}
	if detail == "" {
		return nil
	}
	p := New(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "header Content-Type: "+detail,
		Header("Content-Type", CodeUnsupportedMediaType, detail))
	switch r.Method {
	case http.MethodPost:
		p.WithHeader("Accept-Post", "application/json")
	case http.MethodPatch:
		p.WithHeader("Accept-Patch", "application/json")
	}
	return p
}

// DecodeBytes is Decode for a body already in memory (its size and media type are not checked): the
// strict checks of Decode, then encoding/json.
func DecodeBytes(data []byte, dst any, opts *DecodeOptions) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return Invalid(Body("", CodeBodyMissing, "a JSON body is required"))
	}
	err := strictjson.Decode(data, dst, strictjson.Options{AllowUnknownFields: opts != nil && opts.AllowUnknownFields})
	if err == nil {
		return nil
	}
	var e *strictjson.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("apierror: decode destination: %w", err)
	}
	if e.Kind == strictjson.Syntax {
		return MalformedJSON(e.Offset, e.Detail)
	}
	return Invalid(Body(e.Pointer, decodeCode(e.Kind), e.Detail))
}

// Codes of the strict JSON checks.
const (
	// CodeDuplicateMember: an object names the same member twice. encoding/json keeps the last one,
	// so {"side":"buy","side":"sell"} would be a sell order.
	CodeDuplicateMember = "duplicate_member"
	// CodeInvalidUTF8: a string holds bytes that are not UTF-8, or an escaped lone surrogate
	// ("\ud800"). encoding/json would replace either with U+FFFD without a word (RFC 8259 §8.1, §8.2).
	CodeInvalidUTF8 = "invalid_utf8"
)

// codeInvalidValue is the code of a value a custom UnmarshalJSON or UnmarshalText refused.
const codeInvalidValue = "invalid_value"

// decodeCode is the code of the violation for what the decoder refused.
func decodeCode(k strictjson.Kind) string {
	switch k {
	case strictjson.TrailingData:
		return CodeTrailingData
	case strictjson.DuplicateMember:
		return CodeDuplicateMember
	case strictjson.InvalidUTF8:
		return CodeInvalidUTF8
	case strictjson.UnknownField:
		return CodeUnknownField
	case strictjson.WrongType:
		return CodeWrongType
	}
	return codeInvalidValue
}
