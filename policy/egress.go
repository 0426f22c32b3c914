package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/realm-dev/realm/errcode"
)

// DefaultEgressPort is the port of an egress entry that names none.
const DefaultEgressPort = 443

// Endpoint is one validated egress destination.
type Endpoint struct {
	// Host is a lower-case DNS name, possibly with "*" as its whole first
	// label, or an IP address in its canonical form (IPv6 without
	// brackets).
	Host string
	// Port is the TCP port, 1-65535.
	Port int
}

// String formats e as an egress entry, bracketing an IPv6 address.
func (e Endpoint) String() string {
	if strings.Contains(e.Host, ":") {
		return "[" + e.Host + "]:" + strconv.Itoa(e.Port)
	}
	return e.Host + ":" + strconv.Itoa(e.Port)
}

// ParseEgress validates an egress allowlist, given as realmctl's --egress
// values. Each entry is HOST[:PORT]:
//
//   - HOST is a DNS name of RFC 1123 labels (1-63 letters, digits and
//     hyphens, not starting or ending with a hyphen), at most 253 characters,
//     with no trailing dot; its last label may not be all digits or a
//     0x-number, so a name can never be read as an IPv4 address. "*" may be
//     the whole first label of a name with at least two more labels
//     ("*.example.com"; OpenShell wants three labels in a wildcard). Names
//     are case-insensitive and returned in lower case.
//   - or HOST is an IP address: IPv4 dotted quad, or IPv6, which must be in
//     brackets when a port follows ("[::1]:8443"); no zone.
//   - PORT is 1-65535 in decimal without leading zeros; it defaults to 443.
//
// A scheme, path, query, user info or whitespace is refused, and so is an
// entry that repeats an earlier one once the port is defaulted. Errors are
// SCHEMA_INVALID and name the entry and its index: egress[2] "http://x": ...
// An empty list is valid and means no egress.
func ParseEgress(entries []string) ([]Endpoint, error) {
	var out []Endpoint
	first := make(map[Endpoint]int, len(entries))
	for i, s := range entries {
		e, msg := parseEndpoint(s)
		if msg != "" {
			return nil, errcode.New(errcode.SchemaInvalid, "egress[%d] %q: %s", i, s, msg)
		}
		if j, dup := first[e]; dup {
			return nil, errcode.New(errcode.SchemaInvalid, "egress[%d] %q: duplicate of egress[%d] (%s)", i, s, j, e)
		}
		first[e] = i
		out = append(out, e)
	}
	return out, nil
}

// parseEndpoint returns the endpoint of one entry, or why it is not one.
func parseEndpoint(s string) (Endpoint, string) {
	switch {
	case s == "":
		return Endpoint{}, "empty entry (want HOST[:PORT])"
	case strings.Contains(s, "://"):
		return Endpoint{}, "a scheme is not allowed (want HOST[:PORT])"
	case strings.ContainsAny(s, "@"):
		return Endpoint{}, "user info is not allowed (want HOST[:PORT])"
	case strings.ContainsAny(s, "/"):
		return Endpoint{}, "a path is not allowed (want HOST[:PORT])"
	case strings.ContainsAny(s, "?#"):
		return Endpoint{}, "a query or fragment is not allowed (want HOST[:PORT])"
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r > 0x7e {
			return Endpoint{}, "whitespace, control and non-ASCII characters are not allowed (use the IDNA A-label, xn--...)"
		}
	}

	host, port := s, ""
	bracketed := false
	if rest, ok := strings.CutPrefix(s, "["); ok {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return Endpoint{}, "missing ] after IPv6 address"
		}
		host, bracketed = rest[:end], true
		switch after := rest[end+1:]; {
		case after == "":
		case after[0] == ':':
			port = after[1:]
			if port == "" {
				return Endpoint{}, "empty port after :"
			}
		default:
			return Endpoint{}, fmt.Sprintf("unexpected %q after ]", after)
		}
	} else if strings.Count(s, ":") == 1 {
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return Endpoint{}, "empty port after :"
		}
	} else if strings.Contains(s, ":") {
		// More than one colon: only a bare IPv6 address, default port.
		if _, err := netip.ParseAddr(s); err != nil {
			return Endpoint{}, "not a host name or IP address (an IPv6 address with a port needs brackets: [::1]:8443)"
		}
	}

	e := Endpoint{Port: DefaultEgressPort}
	if port != "" {
		n, msg := parsePort(port)
		if msg != "" {
			return Endpoint{}, msg
		}
		e.Port = n
	}

	if bracketed || strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil || !a.Is6():
			return Endpoint{}, fmt.Sprintf("%q in brackets is not an IPv6 address", host)
		case a.Zone() != "":
			return Endpoint{}, "an IPv6 zone is not allowed"
		}
		e.Host = a.String()
		return e, ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.Host = a.String()
		return e, ""
	}
	if msg := checkHostname(host); msg != "" {
		return Endpoint{}, msg
	}
	e.Host = strings.ToLower(host)
	return e, ""
}

func parsePort(p string) (int, string) {
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, fmt.Sprintf("port %q is not a decimal number", p)
		}
	}
	if len(p) > 1 && p[0] == '0' {
		return 0, fmt.Sprintf("port %q has a leading zero", p)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Sprintf("port %s is out of range 1-65535", p)
	}
	return n, ""
}

// checkHostname returns why h is not an allowed DNS name, or "".
func checkHostname(h string) string {
	switch {
	case h == "":
		return "empty host"
	case len(h) > 253:
		return fmt.Sprintf("host is %d characters long (at most 253)", len(h))
	case strings.HasSuffix(h, "."):
		return "a trailing dot is not allowed"
	}
	labels := strings.Split(h, ".")
	for i, l := range labels {
		if l == "*" {
			if i != 0 {
				return "* is allowed only as the whole first label (*.example.com)"
			}
			if len(labels) < 3 {
				return "a wildcard needs at least two labels after * (*.example.com)"
			}
			continue
		}
		if msg := checkLabel(l); msg != "" {
			return fmt.Sprintf("label %q: %s", l, msg)
		}
	}
	last := labels[len(labels)-1]
	if isNumeric(last) || isHexNumber(last) {
		return fmt.Sprintf("last label %q is numeric; it would read as an IPv4 address", last)
	}
	return ""
}

func checkLabel(l string) string {
	switch {
	case l == "":
		return "empty label"
	case len(l) > 63:
		return "longer than 63 characters"
	case strings.Contains(l, "*"):
		return "* is allowed only as the whole first label (*.example.com)"
	case l[0] == '-' || l[len(l)-1] == '-':
		return "starts or ends with a hyphen"
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Sprintf("character %q is not a letter, digit or hyphen", c)
		}
	}
	return ""
}

func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isHexNumber(s string) bool {
	h, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !('0' <= h[i] && h[i] <= '9' || 'a' <= h[i] && h[i] <= 'f') {
			return false
		}
	}
	return true
}

// check reports why e could not have come from ParseEgress, or "".
func (e Endpoint) check() string {
	if e.Port < 1 || e.Port > 65535 {
		return fmt.Sprintf("port %d is out of range 1-65535", e.Port)
	}
	if a, err := netip.ParseAddr(e.Host); err == nil {
		if a.Zone() != "" || a.String() != e.Host {
			return fmt.Sprintf("host %q is not a canonical IP address", e.Host)
		}
		return ""
	}
	if msg := checkHostname(e.Host); msg != "" {
		return msg
	}
	if strings.ToLower(e.Host) != e.Host {
		return fmt.Sprintf("host %q is not in lower case", e.Host)
	}
	return ""
}
