package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/realm-dev/realm/errcode"
)

// output prints results and errors as text for people (-o text, or -o
// wide: more columns in a table) or as JSON or YAML for machines.
type output struct {
	format string
	w, ew  io.Writer
}

// formats are what -o takes.
var formats = []string{"text", "wide", "json", "yaml"}

func (o *output) json() bool { return o.format == "json" }

// machine reports whether results are documents (JSON or YAML) rather than
// text.
func (o *output) machine() bool { return o.format == "json" || o.format == "yaml" }

// wide reports whether tables get their extra columns.
func (o *output) wide() bool { return o.format == "wide" }

// print writes v as one JSON or YAML document, or text() as text.
func (o *output) print(v any, text func(w io.Writer)) {
	switch o.format {
	case "json":
		enc := json.NewEncoder(o.w)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
	case "yaml":
		b, err := toYAML(v)
		if err != nil {
			fmt.Fprintf(o.ew, "realmctl: yaml: %v\n", err)
			return
		}
		o.w.Write(b)
	default:
		text(o.w)
	}
}

// toYAML is v as YAML with the keys and their order of its JSON (the json
// tags the types already have), in YAML's block style: the JSON is read as
// a YAML node tree (JSON is YAML) whose flow styles are then dropped.
func toYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	return yaml.Marshal(&n)
}

// blockStyle clears n's styles and its children's, so that the encoder
// writes block collections and quotes only the scalars that need it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
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
