package requestnotes

import (
	"context"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestRequestNotes: a value is noted for a request while it is served,
// by its cancel channel, and for no other; none is left once it is
// answered; a request without a cancel channel (not from the kernel) is
// not noted.
func TestRequestNotes(t *testing.T) {
	var u Notes
	one, two := make(chan struct{}), make(chan struct{})
	ctxOf := func(c chan struct{}) context.Context { return &fuse.Context{Cancel: c} }
	if _, ok := u.Of(ctxOf(one)); ok {
		t.Fatal("a request not in progress has a note")
	}
	done := u.hold(one, 0o027)
	if got, ok := u.Of(ctxOf(one)); !ok || got != 0o027 {
		t.Fatalf("Of(one) = %o, %v; want 027, true", got, ok)
	}
	// Two requests in progress at once (of one thread: one the kernel
	// gave up on) each have their own.
	again := u.hold(two, 0o022)
	if got, ok := u.Of(ctxOf(one)); !ok || got != 0o027 {
		t.Fatalf("Of(one) beside another request = %o, %v; want 027, true", got, ok)
	}
	if got, ok := u.Of(ctxOf(two)); !ok || got != 0o022 {
		t.Fatalf("Of(two) = %o, %v; want 022, true", got, ok)
	}
	again()
	done()
	if _, ok := u.Of(ctxOf(one)); ok || len(u.m) != 0 {
		t.Fatalf("notes left after every request was answered: %v", u.m)
	}
	u.hold(nil, 0o022)() // no cancel channel: nothing to name the request by
	if _, ok := u.Of(context.Background()); ok || len(u.m) != 0 {
		t.Fatal("a request without a cancel channel was noted")
	}
}
