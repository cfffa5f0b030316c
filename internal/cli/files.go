package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// outputFile is a file nettrace writes whole (export's pcapng): it is
// written to a temporary file beside its target and renamed over the
// target only once complete, so that a failed command leaves the target
// as it was and nothing beside it.
type outputFile struct {
	*os.File
	target string
}

// createOutput starts writing target (mode perm), beside it.
func createOutput(target string, perm os.FileMode) (*outputFile, error) {
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".partial-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", target, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("create %s: %w", target, err)
	}
	return &outputFile{File: f, target: target}, nil
}

// commit puts the finished file in its target's place.
func (o *outputFile) commit() error {
	if err := o.Sync(); err != nil {
		o.abort()
		return fmt.Errorf("write %s: %w", o.target, err)
	}
	if err := o.Close(); err != nil {
		os.Remove(o.Name())
		return fmt.Errorf("write %s: %w", o.target, err)
	}
	if err := os.Rename(o.Name(), o.target); err != nil {
		os.Remove(o.Name())
		return fmt.Errorf("write %s: %w", o.target, err)
	}
	return nil
}

// abort removes what was written: the target stays as it was.
func (o *outputFile) abort() {
	o.Close()
	os.Remove(o.Name())
}

// refuseOverwrite refuses an output that is one of the inputs, or that
// is a recording (a recording is never replaced by what is made of it):
// before anything is opened for writing.
func refuseOverwrite(flag, out string, inputs []string) error {
	st, err := os.Stat(out)
	if err != nil {
		return nil // a new file
	}
	for _, in := range inputs {
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return usageError{fmt.Errorf("%s %s is also a recording to read: name another file to write", flag, out)}
		}
	}
	f, err := os.Open(out)
	if err != nil {
		return nil // writing will say why it cannot
	}
	defer f.Close()
	head := make([]byte, len(trace.Magic))
	if n, _ := io.ReadFull(f, head); n == len(head) && bytes.Equal(head, trace.Magic[:]) {
		return usageError{fmt.Errorf("%s %s is a nettrace recording: it would be overwritten; name another file to write (the order is --pcapng OUT FILE...)", flag, out)}
	}
	return nil
}

// recordingName matches what is named as a recording, not a filter: a
// path, or a name ending in .ntrace (a split run's parts: .ntrace.N).
var recordingName = regexp.MustCompile(`^[^\s()!&|]*(/[^\s]*|\.ntrace(\.[0-9]+)?)$`)

// stdinName names standard input among the recordings.
const stdinName = "-"

// readableInputs makes each recording named a file that can be read more
// than once (clock alignment and export read their start again): standard
// input ("-") and pipes (<(...)) are copied, once, to a temporary file,
// which done removes. named puts the names given back into an error that
// names a copy.
func readableInputs(names []string) (files []string, named func(error) error, done func(), err error) {
	copies := map[string]string{}
	done = func() {
		for c := range copies {
			os.Remove(c)
		}
	}
	named = func(err error) error {
		if err == nil || len(copies) == 0 {
			return err
		}
		msg := err.Error()
		for c, n := range copies {
			msg = strings.ReplaceAll(msg, c, n)
		}
		return renamedError{msg, err}
	}
	for _, n := range names {
		st, serr := os.Stat(n)
		if n != stdinName && serr == nil && st.Mode().IsRegular() {
			files = append(files, n)
			continue
		}
		path, err := spool(n)
		if err != nil {
			done()
			return nil, nil, nil, err
		}
		copies[path] = n
		if n == stdinName {
			copies[path] = "standard input"
		}
		files = append(files, path)
	}
	return files, named, done, nil
}

// renamedError is an error whose words name the recordings as they were
// given; it is still the error it was (errors.As).
type renamedError struct {
	msg string
	err error
}

func (e renamedError) Error() string { return e.msg }
func (e renamedError) Unwrap() error { return e.err }

// spool copies a stream to a temporary file, readable by its owner only
// (a recording holds packet headers).
func spool(name string) (string, error) {
	in := os.Stdin
	if name != stdinName {
		f, err := os.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		in = f
	}
	tmp, err := os.CreateTemp("", "nettrace-input-*.ntrace")
	if err != nil {
		return "", fmt.Errorf("copy %s to read it: %w", name, err)
	}
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("copy %s to read it: %w", name, err)
	}
	return tmp.Name(), nil
}

// checkRecordingNames refuses, before anything is read or written, a
// recording named that is not there, or a directory.
func checkRecordingNames(names []string) error {
	for _, n := range names {
		if n == stdinName {
			continue
		}
		st, err := os.Stat(n)
		switch {
		case err != nil:
			return usageError{fmt.Errorf("%s: no such recording", n)}
		case st.IsDir():
			return usageError{fmt.Errorf("%s is a directory: name its recordings (%s/*.ntrace)", n, strings.TrimSuffix(n, "/"))}
		}
	}
	return nil
}
