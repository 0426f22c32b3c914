package interceptor

import (
	"fmt"
	"strings"
	"unicode"
)

// grpcCodes are the gRPC codes by the names an InterceptorResult's
// status_code uses, with the description tonic (0.14.6, the version
// OpenShell's Cargo.lock pins) prints for each: tonic/src/status.rs,
// Code::description.
var grpcCodes = map[string]string{
	"OK":                  "The operation completed successfully",
	"CANCELLED":           "The operation was cancelled",
	"UNKNOWN":             "Unknown error",
	"INVALID_ARGUMENT":    "Client specified an invalid argument",
	"DEADLINE_EXCEEDED":   "Deadline expired before operation could complete",
	"NOT_FOUND":           "Some requested entity was not found",
	"ALREADY_EXISTS":      "Some entity that we attempted to create already exists",
	"PERMISSION_DENIED":   "The caller does not have permission to execute the specified operation",
	"RESOURCE_EXHAUSTED":  "Some resource has been exhausted",
	"FAILED_PRECONDITION": "The system is not in a state required for the operation's execution",
	"ABORTED":             "The operation was aborted",
	"OUT_OF_RANGE":        "Operation was attempted past the valid range",
	"UNIMPLEMENTED":       "Operation is not implemented or not supported",
	"INTERNAL":            "Internal error",
	"UNAVAILABLE":         "The service is currently unavailable",
	"DATA_LOSS":           "Unrecoverable data loss or corruption",
	"UNAUTHENTICATED":     "The request does not have valid authentication credentials",
}

// DenialMessage is what `openshell sandbox create` prints (after miette's
// "Error:" and its mark) when an interceptor denies the CreateSandbox:
//
//   - the gateway turns the denial into a gRPC status
//     (crates/openshell-gateway-interceptors/src/runtime.rs,
//     apply_evaluation_result and status_from_result): the result's
//     status_code by name, trimmed and case-folded, PERMISSION_DENIED when
//     it names no code; the reason, or "operation denied by gateway
//     interceptor" when it is blank;
//   - the CLI prints that status with its Display
//     (crates/openshell-cli/src/run.rs, sandbox_create:
//     miette!(status.to_string())), which in tonic 0.14.6 is
//     code: '<description>', message: <the message as Rust's {:?}>.
func DenialMessage(r *Result) string {
	reason := r.Reason
	if strings.TrimSpace(reason) == "" {
		reason = "operation denied by gateway interceptor"
	}
	return StatusMessage(strings.ToUpper(strings.TrimSpace(r.StatusCode)), reason)
}

// StatusMessage is tonic 0.14.6's Display of a status the CLI got back
// (no source error: the status came over the wire): the code's
// description, then the message quoted, if there is one. An unknown code
// name is PERMISSION_DENIED, as the gateway maps it.
func StatusMessage(code, message string) string {
	desc, ok := grpcCodes[code]
	if !ok {
		desc = grpcCodes["PERMISSION_DENIED"]
	}
	s := fmt.Sprintf("code: '%s'", desc)
	if message != "" {
		s += ", message: " + rustDebugString(message)
	}
	return s
}

// rustDebugString quotes s as Rust's <str as Debug> does: backslash escapes
// for \t \r \n \\ \" and \0, \u{hex} for what is not printable (Go's
// unicode.IsPrint stands in for Rust's is_printable; they agree on ASCII).
func rustDebugString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch r {
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case 0:
			b.WriteString(`\0`)
		default:
			if unicode.IsPrint(r) {
				b.WriteRune(r)
			} else {
				fmt.Fprintf(&b, `\u{%x}`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
