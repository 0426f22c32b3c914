package main

import (
	"errors"
	"fmt"
)

// errUnknownOption is wrapped by parseMountOptions for a usage error: an
// option it does not know, or a known one given a value it cannot take.
var errUnknownOption = errors.New("unknown mount option")

// optionValueError is a known option given a value it cannot take: the
// message names the value's problem, not the option as unknown (sshfs
// and bindfs users read "unknown" as a typo in the name).
type optionValueError struct {
	opt  string // as given: key=value, or key
	want string // what would do
}

func (e *optionValueError) Error() string { return fmt.Sprintf("-o %s: %s", e.opt, e.want) }

// Unwrap makes a value error a usage error about -o, as an unknown option is.
func (e *optionValueError) Unwrap() error { return errUnknownOption }

// badValue is the error of option key given val.
func badValue(key, val, want string) error {
	return &optionValueError{opt: key + "=" + val, want: want}
}

// misused is the error of an option parseMountOptions has no case for: a
// known key in the wrong form (a value where it takes none, none where it
// needs one), or an unknown key. The known keys are the help's table.
func misused(key, val string, hasVal bool) error {
	doc, known := lookupOptionDoc(key)
	switch {
	case !known:
		opt := key
		if hasVal {
			opt += "=" + val
		}
		return fmt.Errorf("-o %s: %w (see realmfs --help)", opt, errUnknownOption)
	case doc.value == "":
		return &optionValueError{opt: key + "=" + val, want: key + " takes no value"}
	case hasVal: // an empty value
		return &optionValueError{opt: key + "=", want: "want " + key + "=" + doc.value}
	}
	return &optionValueError{opt: key, want: "want " + key + "=" + doc.value}
}
