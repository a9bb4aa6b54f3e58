// Package versiontest holds test helpers for the changes of a versioning.Registry: golden tests that
// pin down each transform with a file of the newer shape and a file of the older one.
//
//	func TestChanges(t *testing.T) {
//		versiontest.Golden(t, api.Registry(), "testdata/changes")
//	}
//
// For every registered change Golden expects a directory named after it, holding the pairs its
// functions need:
//
//	<dir>/<change>/response.newer.json → response.older.json   (Response)
//	<dir>/<change>/request.older.json  → request.newer.json    (Request)
//	<dir>/<change>/event.newer.json    → event.older.json      (Event, or Response scoped to an Object)
//
// Event files hold {"type":"order.created","data":{…}}. The input of each pair is written by hand;
// run the tests with SVC_UPDATE_GOLDEN=1 to (re)write the outputs from the transform, then review
// the diff. A missing input, an output that differs, and a transform that changes nothing in its
// input (the golden file does not exercise it) all fail the test. Comparison is on the JSON value,
// with numbers compared digit for digit.
package versiontest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/svcplatform/conventions/versioning"
)

// EnvUpdate, set to 1, makes Golden write the output files instead of comparing them.
const EnvUpdate = "SVC_UPDATE_GOLDEN"

// Golden checks every change of reg against the golden files under dir, one subtest per change
// and direction.
func Golden(t *testing.T, reg *versioning.Registry, dir string) {
	t.Helper()
	update := os.Getenv(EnvUpdate) == "1"
	for _, c := range reg.AllChanges() {
		t.Run(c.Name, func(t *testing.T) {
			cdir := filepath.Join(dir, c.Name)
			ran := false
			if c.Response != nil {
				ran = true
				t.Run("response", func(t *testing.T) {
					pair(t, update, filepath.Join(cdir, "response.newer.json"), filepath.Join(cdir, "response.older.json"), c.ApplyResponse)
				})
			}
			if c.Request != nil {
				ran = true
				t.Run("request", func(t *testing.T) {
					pair(t, update, filepath.Join(cdir, "request.older.json"), filepath.Join(cdir, "request.newer.json"), c.ApplyRequest)
				})
			}
			if c.Event != nil || (c.Object != "" && c.Response != nil) {
				ran = true
				t.Run("event", func(t *testing.T) {
					pair(t, update, filepath.Join(cdir, "event.newer.json"), filepath.Join(cdir, "event.older.json"), applyEvent(c))
				})
			}
			if !ran {
				t.Logf("change %s has no transform: nothing to compare", c.Name)
			}
		})
	}
}

type eventFile struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func applyEvent(c versioning.Change) func([]byte) ([]byte, error) {
	return func(in []byte) ([]byte, error) {
		var ev eventFile
		if err := json.Unmarshal(in, &ev); err != nil {
			return nil, err
		}
		if ev.Type == "" || len(ev.Data) == 0 {
			return nil, errors.New(`versiontest: an event file needs "type" and "data"`)
		}
		typ, data, err := c.ApplyEvent(ev.Type, ev.Data)
		if err != nil {
			return nil, err
		}
		return json.Marshal(eventFile{Type: typ, Data: data})
	}
}

func pair(t *testing.T, update bool, inPath, outPath string, apply func([]byte) ([]byte, error)) {
	t.Helper()
	if err := checkPair(update, inPath, outPath, apply); err != nil {
		t.Fatal(err)
	}
}

// checkPair applies the transform to the input file and compares (or, updating, writes) the output.
func checkPair(update bool, inPath, outPath string, apply func([]byte) ([]byte, error)) error {
	in, err := os.ReadFile(inPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("golden input %s is missing: write the shape the transform receives by hand", inPath)
	}
	if err != nil {
		return err
	}
	inCanon, err := Canonical(in)
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", inPath, err)
	}
	got, err := apply(in)
	if err != nil {
		return fmt.Errorf("transform of %s: %w", inPath, err)
	}
	gotCanon, err := Canonical(got)
	if err != nil {
		return fmt.Errorf("transform output is not JSON: %w", err)
	}
	if bytes.Equal(gotCanon, inCanon) {
		return fmt.Errorf("the transform changed nothing in %s: the golden input does not exercise it", inPath)
	}
	if update {
		return os.WriteFile(outPath, gotCanon, 0o644)
	}
	want, err := os.ReadFile(outPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("golden output %s is missing: run with %s=1 to write it, then review it", outPath, EnvUpdate)
	}
	if err != nil {
		return err
	}
	wantCanon, err := Canonical(want)
	if err != nil {
		return fmt.Errorf("%s is not JSON: %w", outPath, err)
	}
	if !bytes.Equal(gotCanon, wantCanon) {
		return fmt.Errorf("%s → %s differs:\nwant %s\ngot  %s", filepath.Base(inPath), filepath.Base(outPath), wantCanon, gotCanon)
	}
	return nil
}

// Canonical re-encodes one JSON value with sorted keys and two-space indentation, numbers kept as
// written, so that two bodies compare equal exactly when they hold the same JSON value.
func Canonical(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("versiontest: trailing data after the JSON value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
