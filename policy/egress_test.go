package policy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/realm-dev/realm/errcode"
)

func TestParseEgressGood(t *testing.T) {
	tests := []struct {
		in   string
		want Endpoint
	}{
		{"example.com", Endpoint{"example.com", 443}},
		{"example.com:8443", Endpoint{"example.com", 8443}},
		{"API.Example.COM", Endpoint{"api.example.com", 443}},
		{"localhost", Endpoint{"localhost", 443}},
		{"localhost:1", Endpoint{"localhost", 1}},
		{"a.b:65535", Endpoint{"a.b", 65535}},
		{"*.example.com", Endpoint{"*.example.com", 443}},
		{"*.api.example.com:80", Endpoint{"*.api.example.com", 80}},
		{"xn--bcher-kva.example", Endpoint{"xn--bcher-kva.example", 443}},
		{"1password.com", Endpoint{"1password.com", 443}},
		{"a-b.c-d.e", Endpoint{"a-b.c-d.e", 443}},
		{"example.com2", Endpoint{"example.com2", 443}},
		{strings.Repeat("a", 63) + ".com", Endpoint{strings.Repeat("a", 63) + ".com", 443}},
		{"10.0.0.1", Endpoint{"10.0.0.1", 443}},
		{"10.0.0.1:5432", Endpoint{"10.0.0.1", 5432}},
		{"::1", Endpoint{"::1", 443}},
		{"2001:db8::1", Endpoint{"2001:db8::1", 443}},
		{"[::1]", Endpoint{"::1", 443}},
		{"[::1]:8443", Endpoint{"::1", 8443}},
		{"[2001:DB8:0:0::1]:22", Endpoint{"2001:db8::1", 22}},
		{"[::ffff:1.2.3.4]:80", Endpoint{"::ffff:1.2.3.4", 80}},
	}
	for _, tt := range tests {
		got, err := ParseEgress([]string{tt.in})
		if err != nil {
			t.Errorf("ParseEgress(%q): %v", tt.in, err)
			continue
		}
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("ParseEgress(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if msg := got[0].check(); msg != "" {
			t.Errorf("ParseEgress(%q) = %v, which check refuses: %s", tt.in, got[0], msg)
		}
		// String gives an entry that parses back to the same endpoint.
		again, err := ParseEgress([]string{got[0].String()})
		if err != nil || again[0] != got[0] {
			t.Errorf("ParseEgress(%q) = %v, %v; want %v", got[0].String(), again, err, got[0])
		}
	}
}

func TestParseEgressList(t *testing.T) {
	got, err := ParseEgress([]string{"a.example.com", "a.example.com:80", "[::1]:443", "::2"})
	want := []Endpoint{{"a.example.com", 443}, {"a.example.com", 80}, {"::1", 443}, {"::2", 443}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseEgress = %v, %v; want %v", got, err, want)
	}
	if got, err := ParseEgress(nil); err != nil || len(got) != 0 {
		t.Errorf("ParseEgress(nil) = %v, %v", got, err)
	}
}

func TestParseEgressBad(t *testing.T) {
	long := strings.Repeat("abcdefghi.", 25) + "com" // 253 is the limit
	tests := []struct {
		entries []string
		want    string
	}{
		{[]string{""}, `egress[0] "": empty entry`},
		{[]string{"ok.com", "ok.org", "http://x"}, `egress[2] "http://x": a scheme is not allowed`},
		{[]string{"https://example.com:443"}, "a scheme is not allowed"},
		{[]string{"example.com/path"}, "a path is not allowed"},
		{[]string{"user@example.com"}, "user info is not allowed"},
		{[]string{"example.com?x=1"}, "a query or fragment is not allowed"},
		{[]string{"example.com#x"}, "a query or fragment is not allowed"},
		{[]string{" example.com"}, "whitespace"},
		{[]string{"exa mple.com"}, "whitespace"},
		{[]string{"bücher.example"}, "non-ASCII"},
		{[]string{"example.com:"}, "empty port"},
		{[]string{"example.com:0"}, "port 0 is out of range"},
		{[]string{"example.com:65536"}, "port 65536 is out of range"},
		{[]string{"example.com:99999999999999999999"}, "out of range"},
		{[]string{"example.com:-1"}, "not a decimal number"},
		{[]string{"example.com:+1"}, "not a decimal number"},
		{[]string{"example.com:https"}, "not a decimal number"},
		{[]string{"example.com:0443"}, "leading zero"},
		{[]string{"a.example.com:1:2"}, "not a host name or IP address"},
		{[]string{"example.com."}, "a trailing dot"},
		{[]string{".example.com"}, "empty label"},
		{[]string{"a..example.com"}, "empty label"},
		{[]string{"-a.example.com"}, "starts or ends with a hyphen"},
		{[]string{"a-.example.com"}, "starts or ends with a hyphen"},
		{[]string{"a_b.example.com"}, `character '_'`},
		{[]string{strings.Repeat("a", 64) + ".com"}, "longer than 63 characters"},
		{[]string{long + "x"}, "host is 254 characters long"},
		{[]string{"*"}, "a wildcard needs at least two labels"},
		{[]string{"*.com"}, "a wildcard needs at least two labels"},
		{[]string{"a.*.example.com"}, "* is allowed only as the whole first label"},
		{[]string{"*a.example.com"}, "* is allowed only as the whole first label"},
		{[]string{"**.example.com"}, "* is allowed only as the whole first label"},
		{[]string{"*.*.example.com"}, "* is allowed only as the whole first label"},
		{[]string{"1.2.3"}, "numeric"},
		{[]string{"1.2.3.4.5"}, "numeric"},
		{[]string{"010.0.0.1"}, "numeric"},
		{[]string{"256.0.0.1"}, "numeric"},
		{[]string{"0x7f000001"}, "numeric"},
		{[]string{"127"}, "numeric"},
		{[]string{"[::1"}, "missing ]"},
		{[]string{"[::1]x"}, `unexpected "x" after ]`},
		{[]string{"[::1]:"}, "empty port"},
		{[]string{"[1.2.3.4]:80"}, "is not an IPv6 address"},
		{[]string{"[example.com]:80"}, "is not an IPv6 address"},
		{[]string{"[fe80::1%eth0]:80"}, "zone"},
		{[]string{"fe80::1%eth0"}, "zone"},
		{[]string{"a.com", "b.com", "A.com:443"}, `egress[2] "A.com:443": duplicate of egress[0]`},
		{[]string{"[::1]", "::1"}, `egress[1] "::1": duplicate of egress[0]`},
		{[]string{"[::1]:443", "[0:0::1]"}, "duplicate of egress[0]"},
	}
	for _, tt := range tests {
		got, err := ParseEgress(tt.entries)
		if err == nil {
			t.Errorf("ParseEgress(%q) = %v, want error %q", tt.entries, got, tt.want)
			continue
		}
		if c, _ := errcode.Of(err); c != errcode.SchemaInvalid {
			t.Errorf("ParseEgress(%q): code %q, want SCHEMA_INVALID", tt.entries, c)
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseEgress(%q) = %q, want it to contain %q", tt.entries, err, tt.want)
		}
	}
	if len(long) != 253 {
		t.Fatalf("test host is %d long", len(long))
	}
	if _, err := ParseEgress([]string{long}); err != nil {
		t.Errorf("253-character host: %v", err)
	}
}
