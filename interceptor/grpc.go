package interceptor

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ServiceName is the gRPC service OpenShell's gateway calls.
const ServiceName = "openshell.gateway_interceptor.v1.GatewayInterceptor"

// codec carries the hand-encoded messages of wire.go under gRPC's usual
// content type (application/grpc+proto): the bytes are protobuf.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(wireMessage)
	if !ok {
		return nil, fmt.Errorf("interceptor codec: cannot marshal %T", v)
	}
	return m.marshal()
}

func (codec) Unmarshal(data []byte, v any) error {
	m, ok := v.(wireMessage)
	if !ok {
		return fmt.Errorf("interceptor codec: cannot unmarshal into %T", v)
	}
	return m.unmarshal(data)
}

// Handler answers the gateway's calls.
type Handler interface {
	Describe(ctx context.Context) (*Manifest, error)
	Evaluate(ctx context.Context, e *Evaluation) (*Result, error)
}

func describeHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	if err := dec(&describeRequest{}); err != nil {
		return nil, err
	}
	return srv.(Handler).Describe(ctx)
}

func evaluateHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	e := &Evaluation{}
	if err := dec(e); err != nil {
		return nil, err
	}
	return srv.(Handler).Evaluate(ctx, e)
}

// serviceDesc is the GatewayInterceptor service without
// SnapshotProviderProfiles: realm vends no provider profiles (the manifest
// says provider_profiles = false), and a call of it is UNIMPLEMENTED.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Handler)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Describe", Handler: describeHandler},
		{MethodName: "Evaluate", Handler: evaluateHandler},
	},
	Streams:  []grpc.StreamDesc{},
	Metadata: "gateway_interceptor.proto",
}

// NewServer returns a gRPC server that serves h.
func NewServer(h Handler) *grpc.Server {
	s := grpc.NewServer(grpc.ForceServerCodec(codec{}))
	s.RegisterService(&serviceDesc, h)
	return s
}

// Client calls an interceptor as OpenShell's gateway does; the fake
// OpenShell CLI and the tests use it.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects to an interceptor at a unix socket path.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		return nil, fmt.Errorf("interceptor client: %w", err)
	}
	return &Client{conn: conn}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Describe calls Describe.
func (c *Client) Describe(ctx context.Context) (*Manifest, error) {
	m := &Manifest{}
	if err := c.conn.Invoke(ctx, "/"+ServiceName+"/Describe", &describeRequest{}, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Evaluate calls Evaluate.
func (c *Client) Evaluate(ctx context.Context, e *Evaluation) (*Result, error) {
	r := &Result{}
	if err := c.conn.Invoke(ctx, "/"+ServiceName+"/Evaluate", e, r); err != nil {
		return nil, err
	}
	return r, nil
}
