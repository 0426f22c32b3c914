package interceptor

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	testSession = "0123456789ab"
	testMount   = "/var/lib/realm/mounts/5d1a0e4b7c3f2a19"
	testState   = "/var/lib/realm"
)

type fakeSessions map[string]string

func (f fakeSessions) Mount(id string) (string, error) {
	if m, ok := f[id]; ok {
		return m, nil
	}
	return "", errors.New("no such session")
}
func (f fakeSessions) StateDir() string { return testState }
func (f fakeSessions) Workspaces() ([]string, error) {
	return []string{"/home/u/ws", testMount}, nil
}

func testService() *Service { return &Service{Sessions: fakeSessions{testSession: testMount}} }

// golden is one testdata case: a CreateSandbox operation in protobuf JSON,
// taken from OpenShell's own tests (source says where), and what realm's
// interceptor answers in a phase.
type golden struct {
	Source    string         `json:"source"`
	Phase     string         `json:"phase"`
	Operation map[string]any `json:"operation"`
	Want      struct {
		Allowed        bool    `json:"allowed"`
		Patches        []Patch `json:"patches"`
		ReasonContains string  `json:"reasonContains"`
	} `json:"want"`
}

func loadGoldens(t *testing.T) map[string]golden {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	out := map[string]golden{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(data, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g.Source == "" {
			t.Fatalf("%s: no source", f)
		}
		out[filepath.Base(f)] = g
	}
	return out
}

func phaseOf(t *testing.T, s string) Phase {
	switch s {
	case "modify_operation":
		return PhaseModifyOperation
	case "validate":
		return PhaseValidate
	}
	t.Fatalf("phase %q", s)
	return 0
}

// jsonEqual compares through JSON, so []Patch(nil) and [] agree.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var va, vb any
	json.Unmarshal(ja, &va)
	json.Unmarshal(jb, &vb)
	if va == nil {
		va = []any{}
	}
	if vb == nil {
		vb = []any{}
	}
	return reflect.DeepEqual(va, vb)
}

func TestGoldens(t *testing.T) {
	svc := testService()
	for name, g := range loadGoldens(t) {
		t.Run(name, func(t *testing.T) {
			// Through the wire encoding, as the gateway sends it.
			e := &Evaluation{InterceptorName: "realm", BindingID: "b", Service: OpenShellService, Method: CreateSandbox,
				Phase: phaseOf(t, g.Phase), Operation: g.Operation}
			b, err := e.marshal()
			if err != nil {
				t.Fatal(err)
			}
			var got Evaluation
			if err := got.unmarshal(b); err != nil {
				t.Fatal(err)
			}
			res, err := svc.Evaluate(context.Background(), &got)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != g.Want.Allowed {
				t.Fatalf("allowed %v, want %v (reason %q)", res.Allowed, g.Want.Allowed, res.Reason)
			}
			if !res.Allowed && (!strings.Contains(res.Reason, g.Want.ReasonContains) || res.StatusCode != "PERMISSION_DENIED") {
				t.Errorf("reason %q (%s), want one containing %q", res.Reason, res.StatusCode, g.Want.ReasonContains)
			}
			if !jsonEqual(res.Patches, g.Want.Patches) {
				gotJ, _ := json.Marshal(res.Patches)
				wantJ, _ := json.Marshal(g.Want.Patches)
				t.Errorf("patches\n %s\nwant\n %s", gotJ, wantJ)
			}
			if !res.Allowed || len(res.Patches) == 0 {
				return
			}
			// What the gateway does next: apply the patches, then
			// validate. The result carries exactly one bind, realm's.
			patched, err := ApplyPatches(g.Operation, res.Patches)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			op := patched.(map[string]any)
			binds, err := driverMounts(op)
			binds = hostBacked(binds)
			if err != nil || len(binds) != 1 || binds[0] != (mount{"podman", "bind", testMount, Workspace, false}) {
				t.Errorf("binds after the patch: %+v (%v)", binds, err)
			}
			v := svc.evaluate(&Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseValidate, Operation: op})
			if !v.Allowed {
				t.Errorf("validate of the patched operation denied: %s", v.Reason)
			}
		})
	}
}

// TestWireBytes pins the field numbers of proto/gateway_interceptor.proto.
func TestWireBytes(t *testing.T) {
	tests := []struct {
		name string
		msg  wireMessage
		want string // hex
	}{
		// JsonPatch{op=1 "add", path=2 "/a", value=3 Value{string_value=3 "x"}}
		{"JsonPatch", &Patch{Op: "add", Path: "/a", Value: "x"}, "0a03616464" + "12022f61" + "1a031a0178"},
		// InterceptorResult{allowed=1 true, reason=2 "no", status_code=3 "X"}
		{"InterceptorResult", &Result{Allowed: true, Reason: "no", StatusCode: "X"}, "0801" + "12026e6f" + "1a0158"},
		// InterceptorManifest{name=1 "n", bindings=2 [{id=1 "b", selector=2 {rpc=1 "r"}, phases=3 packed [2,3]}]}
		{"InterceptorManifest", &Manifest{Name: "n", Bindings: []Binding{{ID: "b", RPC: "r", Phases: []Phase{2, 3}}}},
			"0a016e" + "120c" + "0a0162" + "1203" + "0a0172" + "1a020203"},
		// InterceptorEvaluation{service=3 "s", method=4 "m", validate=7 {proposed_operation=1 Struct{}}}
		{"InterceptorEvaluation", &Evaluation{Service: "s", Method: "m", Phase: PhaseValidate, Operation: map[string]any{}},
			"1a0173" + "22016d" + "3a02" + "0a00"},
	}
	for _, tt := range tests {
		b, err := tt.msg.marshal()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := hex.EncodeToString(b); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	msgs := []struct{ in, out wireMessage }{
		{&Evaluation{InterceptorName: "i", BindingID: "b", Service: "s", Method: "m", Principal: map[string]string{"kind": "user"},
			Phase: PhaseValidate, Operation: map[string]any{"a": []any{1.0, "x", true, nil}}, CurrentState: map[string]any{"c": "d"}}, &Evaluation{}},
		{&Evaluation{Phase: PhasePostCommit, Operation: map[string]any{"name": "x"}}, &Evaluation{}},
		{&Result{Allowed: true, Patches: []Patch{{Op: "add", Path: "/x", Value: map[string]any{"k": []any{"v"}}}, {Op: "remove", Path: "/y"}},
			LogAnnotations: map[string]string{"a": "b"}}, &Result{}},
		{&Manifest{Name: "n", FailurePolicy: "fail_closed", ExpectedAudience: "aud",
			Bindings: []Binding{{ID: "b", RPC: CreateSandboxRPC, Phases: []Phase{PhaseModifyOperation, PhaseValidate}, FailurePolicy: "fail_open"}}}, &Manifest{}},
	}
	for _, m := range msgs {
		b, err := m.in.marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.out.unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.in, m.out) {
			t.Errorf("round trip of %T:\n got %+v\nwant %+v", m.in, m.out, m.in)
		}
	}
}

// TestGRPC serves the interceptor on a unix socket and calls it as the
// gateway does.
func TestGRPC(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "i.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(testService())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	defer func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Bindings) != 1 || m.Bindings[0].RPC != CreateSandboxRPC || !reflect.DeepEqual(m.Bindings[0].Phases, []Phase{PhaseModifyOperation, PhaseValidate}) {
		t.Errorf("manifest %+v", m)
	}
	g := loadGoldens(t)["modify-cli-request-realm.json"]
	r, err := c.Evaluate(context.Background(), &Evaluation{Service: OpenShellService, Method: CreateSandbox, Phase: PhaseModifyOperation, Operation: g.Operation})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || !jsonEqual(r.Patches, g.Want.Patches) {
		t.Errorf("evaluate over gRPC: %+v", r)
	}
}

// TestApplyPatchesRFC6902 runs examples of RFC 6902 appendix A.
func TestApplyPatchesRFC6902(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		patches []Patch
		want    string // "" for an error
	}{
		{"A.1 add object member", `{"foo":"bar"}`, []Patch{{Op: "add", Path: "/baz", Value: "qux"}}, `{"baz":"qux","foo":"bar"}`},
		{"A.2 add array element", `{"foo":["bar","baz"]}`, []Patch{{Op: "add", Path: "/foo/1", Value: "qux"}}, `{"foo":["bar","qux","baz"]}`},
		{"A.3 remove member", `{"baz":"qux","foo":"bar"}`, []Patch{{Op: "remove", Path: "/baz"}}, `{"foo":"bar"}`},
		{"A.4 remove array element", `{"foo":["bar","qux","baz"]}`, []Patch{{Op: "remove", Path: "/foo/1"}}, `{"foo":["bar","baz"]}`},
		{"A.5 replace", `{"baz":"qux","foo":"bar"}`, []Patch{{Op: "replace", Path: "/baz", Value: "boo"}}, `{"baz":"boo","foo":"bar"}`},
		{"A.8 test success", `{"baz":"qux","foo":["a",2,"c"]}`, []Patch{{Op: "test", Path: "/baz", Value: "qux"}, {Op: "test", Path: "/foo/1", Value: 2.0}}, `{"baz":"qux","foo":["a",2,"c"]}`},
		{"A.9 test failure", `{"baz":"qux"}`, []Patch{{Op: "test", Path: "/baz", Value: "bar"}}, ""},
		{"A.10 add nested member", `{"foo":"bar"}`, []Patch{{Op: "add", Path: "/child", Value: map[string]any{"grandchild": map[string]any{}}}}, `{"child":{"grandchild":{}},"foo":"bar"}`},
		{"A.12 add to nonexistent target", `{"foo":"bar"}`, []Patch{{Op: "add", Path: "/baz/bat", Value: "qux"}}, ""},
		{"A.14 ~ escape ordering", `{"/":9,"~1":10}`, []Patch{{Op: "test", Path: "/~01", Value: 10.0}}, `{"/":9,"~1":10}`},
		{"A.16 add array value", `{"foo":["bar"]}`, []Patch{{Op: "add", Path: "/foo/-", Value: []any{"abc", "def"}}}, `{"foo":["bar",["abc","def"]]}`},
		{"atomic: a failing patch changes nothing", `{"a":1}`, []Patch{{Op: "add", Path: "/b", Value: 2.0}, {Op: "remove", Path: "/zz"}}, ""},
		{"move is refused", `{"a":1}`, []Patch{{Op: "move", Path: "/b", From: "/a"}}, ""},
	}
	for _, tt := range tests {
		var doc any
		if err := json.Unmarshal([]byte(tt.doc), &doc); err != nil {
			t.Fatal(err)
		}
		before, _ := json.Marshal(doc)
		got, err := ApplyPatches(doc, tt.patches)
		if after, _ := json.Marshal(doc); string(after) != string(before) {
			t.Errorf("%s: the input changed to %s", tt.name, after)
		}
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: no error", tt.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var want any
		json.Unmarshal([]byte(tt.want), &want)
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.Marshal(got)
			t.Errorf("%s: %s, want %s", tt.name, gj, tt.want)
		}
	}
}
