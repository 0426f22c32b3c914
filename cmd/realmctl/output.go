package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/realm-dev/realm/errcode"
)

// output prints results and errors as text for people or JSON for machines.
type output struct {
	format string
	w, ew  io.Writer
}

func (o *output) json() bool { return o.format == "json" }

// print writes v as one JSON document, or text() as text.
func (o *output) print(v any, text func(w io.Writer)) {
	if o.json() {
		enc := json.NewEncoder(o.w)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		return
	}
	text(o.w)
}

// note is a remark for people; JSON output stays one document.
func (o *output) note(format string, args ...any) {
	if !o.json() {
		fmt.Fprintf(o.ew, "realmctl: "+format+"\n", args...)
	}
}

// fail reports err and returns the exit status its code calls for. The
// message is realm's own: a catalogued error's message; the cause (which
// may quote a service) only follows in text mode.
func fail(o *output, err error) int {
	if err == nil {
		return errcode.ExitOK
	}
	code, ok := errcode.Of(err)
	msg := err.Error()
	if ok {
		var e *errcode.Error
		if errors.As(err, &e) {
			msg = e.Message
		}
	}
	if o.json() {
		c := string(code)
		if !ok {
			c = "ERROR"
		}
		enc := json.NewEncoder(o.w)
		enc.SetEscapeHTML(false)
		enc.Encode(map[string]any{"error": map[string]string{"code": c, "message": msg}})
	} else if ok {
		fmt.Fprintf(o.ew, "realmctl: %s: %s\n", code, msg)
	} else {
		fmt.Fprintf(o.ew, "realmctl: %s\n", msg)
	}
	return errcode.ExitStatusOf(err)
}

// errMessage is err's message as fail prints it: a catalogued error's own
// message, without the cause.
func errMessage(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
