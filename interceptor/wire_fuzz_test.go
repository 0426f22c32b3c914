package interceptor

import (
	"bytes"
	"testing"
)

// FuzzWireDecode: every message realm decodes from the wire (Evaluation,
// Result, Manifest) either fails cleanly or decodes to a value that
// encodes, and whose encoding is a fixed point: decoded and encoded again
// it gives the same bytes. No input panics the decoder.
func FuzzWireDecode(f *testing.F) {
	seeds := []wireMessage{
		&Evaluation{InterceptorName: "realm", BindingID: "b", Service: OpenShellService, Method: CreateSandbox,
			Principal: map[string]string{"sub": "u", "": "empty key"}, Phase: PhaseValidate,
			Operation:    map[string]any{"spec": map[string]any{"binds": []any{"/a:/workspace", 1.5, true, nil}}},
			CurrentState: map[string]any{"x": "y"}},
		&Evaluation{Phase: PhaseModifyOperation, Operation: map[string]any{}},
		&Evaluation{Phase: PhasePostCommit},
		&Result{Allowed: true, Reason: "ok", StatusCode: "PERMISSION_DENIED", LogAnnotations: map[string]string{"k": "v"},
			Patches: []Patch{{Op: "add", Path: "/spec/x", Value: map[string]any{"a": []any{1.0, "s"}}}, {Op: "move", Path: "/a", From: "/b"}}},
		&Manifest{Name: "realm", FailurePolicy: "FAIL_CLOSED", ProviderProfiles: true, ExpectedAudience: "aud",
			Bindings: []Binding{{ID: "b", RPC: "/openshell.v1.OpenShell/CreateSandbox", Phases: []Phase{PhaseModifyOperation, PhaseValidate}, FailurePolicy: "FAIL_OPEN"}}},
	}
	for _, m := range seeds {
		b, err := m.marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x02, 0x0a, 0x00})             // validate {proposed_operation: Struct{}}
	f.Add([]byte{0x12, 0x05, 0x1a, 0x03, 0x00, 0x02}) // a binding's packed phases
	f.Add([]byte{0x22, 0x04, 0x1a, 0x02, 0x08, 0x00}) // a patch whose value is null
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}) // a length past the end
	news := []func() wireMessage{
		func() wireMessage { return new(Evaluation) },
		func() wireMessage { return new(Result) },
		func() wireMessage { return new(Manifest) },
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range news {
			m := mk()
			if m.unmarshal(b) != nil {
				continue
			}
			enc, err := m.marshal()
			if err != nil {
				t.Fatalf("%T decoded from %x does not encode: %v", m, b, err)
			}
			m2 := mk()
			if err := m2.unmarshal(enc); err != nil {
				t.Fatalf("%T: its own encoding %x does not decode: %v", m, enc, err)
			}
			enc2, err := m2.marshal()
			if err != nil || !bytes.Equal(enc2, enc) {
				t.Fatalf("%T: encoding is not a fixed point (%v):\n%x\n%x", m, err, enc, enc2)
			}
		}
	})
}
