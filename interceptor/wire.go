package interceptor

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The messages of openshell.gateway_interceptor.v1 that realm uses, with
// the field numbers of OpenShell's proto/gateway_interceptor.proto, encoded
// and decoded by hand with protowire (no generated code; the OpenShell
// descriptors are not vendored). google.protobuf.Struct and Value are the
// well-known types of google.golang.org/protobuf.
//
// Unknown fields are skipped on decode, as protobuf wants.

// Phase is a GatewayInterceptorPhase.
type Phase int32

// The phases (enum values of GatewayInterceptorPhase).
const (
	PhaseUnspecified     Phase = 0
	PhaseModifyOperation Phase = 2
	PhaseValidate        Phase = 3
	PhasePostCommit      Phase = 4
)

func (p Phase) String() string {
	switch p {
	case PhaseModifyOperation:
		return "modify_operation"
	case PhaseValidate:
		return "validate"
	case PhasePostCommit:
		return "post_commit"
	}
	return fmt.Sprintf("phase(%d)", int32(p))
}

// Evaluation is an InterceptorEvaluation: one phase of one operation.
// Operation is the phase payload's proposed_operation (modify_operation,
// validate) or committed_response (post_commit), as protobuf JSON.
type Evaluation struct {
	InterceptorName string            // 1
	BindingID       string            // 2
	Service         string            // 3, e.g. "openshell.v1.OpenShell"
	Method          string            // 4, e.g. "CreateSandbox"
	Principal       map[string]string // 5
	Phase           Phase             // which of 6, 7, 8 is set
	Operation       map[string]any    // field 1 of the phase payload
	CurrentState    map[string]any    // field 2 of ValidateEvaluation
}

// Result is an InterceptorResult.
type Result struct {
	Allowed        bool              // 1
	Reason         string            // 2
	StatusCode     string            // 3, e.g. "PERMISSION_DENIED"
	Patches        []Patch           // 4
	LogAnnotations map[string]string // 5
}

// Patch is a JsonPatch: one RFC 6902 operation. Value is JSON (nil: none).
type Patch struct {
	Op    string `json:"op"`              // 1
	Path  string `json:"path"`            // 2
	Value any    `json:"value,omitempty"` // 3, google.protobuf.Value
	From  string `json:"from,omitempty"`  // 4
}

// Manifest is an InterceptorManifest, Describe's answer.
type Manifest struct {
	Name             string    // 1
	Bindings         []Binding // 2
	FailurePolicy    string    // 3
	ProviderProfiles bool      // 4
	ExpectedAudience string    // 5
}

// Binding is an InterceptorBinding.
type Binding struct {
	ID            string  // 1
	RPC           string  // 2: InterceptorSelector.rpc (field 1 of the selector)
	Phases        []Phase // 3
	FailurePolicy string  // 4
}

// describeRequest is the empty DescribeRequest.
type describeRequest struct{}

// wireMessage is what the codec carries.
type wireMessage interface {
	marshal() ([]byte, error)
	unmarshal([]byte) error
}

var (
	_ wireMessage = (*Evaluation)(nil)
	_ wireMessage = (*Result)(nil)
	_ wireMessage = (*Manifest)(nil)
	_ wireMessage = (*describeRequest)(nil)
)

func (*describeRequest) marshal() ([]byte, error) { return nil, nil }
func (*describeRequest) unmarshal([]byte) error   { return nil }

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// appendMap encodes a map<string,string> field, keys sorted so the bytes
// are deterministic.
func appendMap(b []byte, num protowire.Number, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var e []byte
		e = appendString(e, 1, k)
		e = appendString(e, 2, m[k])
		b = appendBytes(b, num, e)
	}
	return b
}

func marshalStruct(m map[string]any) ([]byte, error) {
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, fmt.Errorf("operation is not a JSON object protobuf can carry: %w", err)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(s)
}

func unmarshalStruct(b []byte) (map[string]any, error) {
	var s structpb.Struct
	if err := proto.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("google.protobuf.Struct: %w", err)
	}
	return s.AsMap(), nil
}

// fields walks the fields of a message, calling f with each field's number,
// type and raw value (for bytes: the contents; for varints: the value in v).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var raw []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, raw, v); err != nil {
			return err
		}
	}
	return nil
}

func mapEntry(raw []byte) (k, v string, err error) {
	err = fields(raw, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			k = string(raw)
		case 2:
			v = string(raw)
		}
		return nil
	})
	return k, v, err
}

func (e *Evaluation) marshal() ([]byte, error) {
	var b []byte
	b = appendString(b, 1, e.InterceptorName)
	b = appendString(b, 2, e.BindingID)
	b = appendString(b, 3, e.Service)
	b = appendString(b, 4, e.Method)
	b = appendMap(b, 5, e.Principal)
	var payload []byte
	if e.Operation != nil {
		op, err := marshalStruct(e.Operation)
		if err != nil {
			return nil, err
		}
		payload = appendBytes(payload, 1, op)
	}
	if e.CurrentState != nil && e.Phase == PhaseValidate {
		cs, err := marshalStruct(e.CurrentState)
		if err != nil {
			return nil, err
		}
		payload = appendBytes(payload, 2, cs)
	}
	switch e.Phase {
	case PhaseModifyOperation:
		b = appendBytes(b, 6, payload)
	case PhaseValidate:
		b = appendBytes(b, 7, payload)
	case PhasePostCommit:
		b = appendBytes(b, 8, payload)
	}
	return b, nil
}

func (e *Evaluation) unmarshal(b []byte) error {
	*e = Evaluation{}
	return fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil // no varint fields; unknown ones are skipped
		}
		switch num {
		case 1:
			e.InterceptorName = string(raw)
		case 2:
			e.BindingID = string(raw)
		case 3:
			e.Service = string(raw)
		case 4:
			e.Method = string(raw)
		case 5:
			k, v, err := mapEntry(raw)
			if err != nil {
				return fmt.Errorf("principal: %w", err)
			}
			if e.Principal == nil {
				e.Principal = map[string]string{}
			}
			e.Principal[k] = v
		case 6, 7, 8:
			// A oneof: the last member on the wire wins.
			e.Phase = map[protowire.Number]Phase{6: PhaseModifyOperation, 7: PhaseValidate, 8: PhasePostCommit}[num]
			e.Operation, e.CurrentState = nil, nil
			return fields(raw, func(pnum protowire.Number, ptyp protowire.Type, praw []byte, _ uint64) error {
				if ptyp != protowire.BytesType {
					return nil
				}
				m, err := unmarshalStruct(praw)
				if err != nil {
					return err
				}
				switch {
				case pnum == 1:
					e.Operation = m
				case pnum == 2 && num == 7:
					e.CurrentState = m
				}
				return nil
			})
		}
		return nil
	})
}

func (p *Patch) marshal() ([]byte, error) {
	var b []byte
	b = appendString(b, 1, p.Op)
	b = appendString(b, 2, p.Path)
	if p.Value != nil {
		v, err := structpb.NewValue(p.Value)
		if err != nil {
			return nil, fmt.Errorf("patch value: %w", err)
		}
		vb, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, 3, vb)
	}
	b = appendString(b, 4, p.From)
	return b, nil
}

func (p *Patch) unmarshal(b []byte) error {
	*p = Patch{}
	return fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			p.Op = string(raw)
		case 2:
			p.Path = string(raw)
		case 3:
			var v structpb.Value
			if err := proto.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("patch value: %w", err)
			}
			p.Value = v.AsInterface()
		case 4:
			p.From = string(raw)
		}
		return nil
	})
}

func (r *Result) marshal() ([]byte, error) {
	var b []byte
	b = appendBool(b, 1, r.Allowed)
	b = appendString(b, 2, r.Reason)
	b = appendString(b, 3, r.StatusCode)
	for i := range r.Patches {
		pb, err := r.Patches[i].marshal()
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, 4, pb)
	}
	b = appendMap(b, 5, r.LogAnnotations)
	return b, nil
}

func (r *Result) unmarshal(b []byte) error {
	*r = Result{}
	return fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.Allowed = v != 0
		case typ != protowire.BytesType:
		case num == 2:
			r.Reason = string(raw)
		case num == 3:
			r.StatusCode = string(raw)
		case num == 4:
			var p Patch
			if err := p.unmarshal(raw); err != nil {
				return err
			}
			r.Patches = append(r.Patches, p)
		case num == 5:
			k, val, err := mapEntry(raw)
			if err != nil {
				return err
			}
			if r.LogAnnotations == nil {
				r.LogAnnotations = map[string]string{}
			}
			r.LogAnnotations[k] = val
		}
		return nil
	})
}

func (m *Manifest) marshal() ([]byte, error) {
	var b []byte
	b = appendString(b, 1, m.Name)
	for _, bd := range m.Bindings {
		var e []byte
		e = appendString(e, 1, bd.ID)
		e = appendBytes(e, 2, appendString(nil, 1, bd.RPC))
		if len(bd.Phases) > 0 {
			var packed []byte
			for _, p := range bd.Phases {
				packed = protowire.AppendVarint(packed, uint64(p))
			}
			e = appendBytes(e, 3, packed)
		}
		e = appendString(e, 4, bd.FailurePolicy)
		b = appendBytes(b, 2, e)
	}
	b = appendString(b, 3, m.FailurePolicy)
	b = appendBool(b, 4, m.ProviderProfiles)
	b = appendString(b, 5, m.ExpectedAudience)
	return b, nil
}

func (m *Manifest) unmarshal(b []byte) error {
	*m = Manifest{}
	return fields(b, func(num protowire.Number, typ protowire.Type, raw []byte, v uint64) error {
		switch {
		case num == 4 && typ == protowire.VarintType:
			m.ProviderProfiles = v != 0
		case typ != protowire.BytesType:
		case num == 1:
			m.Name = string(raw)
		case num == 3:
			m.FailurePolicy = string(raw)
		case num == 5:
			m.ExpectedAudience = string(raw)
		case num == 2:
			var bd Binding
			err := fields(raw, func(bnum protowire.Number, btyp protowire.Type, braw []byte, bv uint64) error {
				switch {
				case bnum == 3 && btyp == protowire.VarintType: // unpacked enum
					bd.Phases = append(bd.Phases, Phase(bv))
				case btyp != protowire.BytesType:
				case bnum == 1:
					bd.ID = string(braw)
				case bnum == 2:
					return fields(braw, func(snum protowire.Number, styp protowire.Type, sraw []byte, _ uint64) error {
						if snum == 1 && styp == protowire.BytesType {
							bd.RPC = string(sraw)
						}
						return nil
					})
				case bnum == 3: // packed enums
					for len(braw) > 0 {
						pv, n := protowire.ConsumeVarint(braw)
						if n < 0 {
							return protowire.ParseError(n)
						}
						bd.Phases = append(bd.Phases, Phase(pv))
						braw = braw[n:]
					}
				case bnum == 4:
					bd.FailurePolicy = string(braw)
				}
				return nil
			})
			if err != nil {
				return err
			}
			m.Bindings = append(m.Bindings, bd)
		}
		return nil
	})
}
