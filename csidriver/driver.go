// Package csidriver is realm's CSI plugin: it gives every Kubernetes pod
// that asks for a realm volume a realmfs mount of a workspace directory.
//
// The plugin never serves a file itself and does not import the FUSE
// layer: it runs the realmfs binary, which detaches and lives on its own
// (its own session), so restarting or upgrading the plugin leaves every
// workspace mounted and serving. What the plugin needs to know about a
// mount it reads again from mountinfo (a fuse.realmfs mount whose source is
// a volume directory under the base dir) and from the daemon itself
// (realmfs status), so a restarted plugin finds its mounts without any
// in-memory state.
package csidriver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DriverName is the CSI driver name, as a CSIDriver object and a
// StorageClass's provisioner name it.
const DriverName = "csi.realm-dev.github.io"

// Config is what the plugin is told on its command line.
type Config struct {
	NodeID   string // this node's name (--nodeid)
	BaseDir  string // workspaces live in BaseDir/volumes/<id>
	StateDir string // what the plugin keeps per published volume: policy, audit log, daemon log
	// PolicyDir holds the policies a volume may name (policyName=NAME is
	// PolicyDir/NAME.yaml), e.g. a ConfigMap mounted into the plugin; ""
	// for none. Outside the base dir, as realmfs requires of a policy.
	PolicyDir string
	Realmfs   string // the realmfs binary
	// DaemonCgroup is a cgroup2 directory each volume's daemon is started
	// into a child of (DaemonCgroup/<volume id>), outside the plugin's
	// container's cgroup; "" starts the daemons in the plugin's cgroup.
	DaemonCgroup string
	// EphemeralSize bounds each inline ephemeral volume's bytes (its
	// default size, and the most its size attribute may ask), enforced
	// where the base dir's file system has project quotas; 0: unbounded.
	EphemeralSize int64
	Version       string // reported by GetPluginInfo
	Log           *slog.Logger
}

// Driver serves the CSI Identity, Controller and Node services.
type Driver struct {
	cfg Config
	// ctrlMu serializes the controller's volume operations, nodeMu the
	// node's: each is a handful of file operations or one realmfs start,
	// and a serial order makes "create twice", "publish twice" and
	// "publish while unpublishing" simple to reason about.
	ctrlMu sync.Mutex
	nodeMu sync.Mutex
	fwd    forwarders     // the audit logs copied onto the plugin's log
	cg     *daemonCgroups // nil without Config.DaemonCgroup
	// quota: the base dir's file system enforces project quotas, so a
	// volume's capacity is its directory's limit (quota.go).
	quota bool
}

// The three CSI services over the one Driver, each a type of its own:
// identity.go, controller.go, node.go with stats.go.
type (
	identityServer struct {
		csi.UnimplementedIdentityServer
		*Driver
	}
	controllerServer struct {
		csi.UnimplementedControllerServer
		*Driver
	}
	nodeServer struct {
		csi.UnimplementedNodeServer
		*Driver
	}
)

// New checks cfg and returns a driver. BaseDir is resolved once, so that
// the sources mountinfo shows (realmfs mounts the resolved path) compare
// equal to the plugin's own paths.
func New(cfg Config) (*Driver, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("a node id is required (--nodeid)")
	}
	if cfg.BaseDir == "" || cfg.StateDir == "" {
		return nil, errors.New("a base dir and a state dir are required (--base-dir, --state-dir)")
	}
	for _, dir := range []*string{&cfg.BaseDir, &cfg.StateDir} {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return nil, fmt.Errorf("make %s: %w", *dir, err)
		}
		abs, err := filepath.EvalSymlinks(*dir)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", *dir, err)
		}
		*dir = abs
	}
	if within(cfg.StateDir, cfg.BaseDir) || within(cfg.BaseDir, cfg.StateDir) {
		// realmfs refuses a policy, audit log or daemon log inside the
		// workspace it serves; keeping the two trees apart rules it out.
		return nil, fmt.Errorf("the state dir %s and the base dir %s must not contain one another", cfg.StateDir, cfg.BaseDir)
	}
	if cfg.PolicyDir != "" {
		abs, err := filepath.Abs(cfg.PolicyDir)
		if err != nil {
			return nil, err
		}
		if cfg.PolicyDir = abs; within(abs, cfg.BaseDir) {
			return nil, fmt.Errorf("the policy dir %s is inside the base dir %s: a workspace's processes could change its policy", abs, cfg.BaseDir)
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.BaseDir, volumesDir), 0o755); err != nil {
		return nil, fmt.Errorf("make the volumes dir: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	d := &Driver{cfg: cfg}
	if err := projectQuotaEnforced(filepath.Join(cfg.BaseDir, volumesDir)); err != nil {
		cfg.Log.Info("volume capacity is recorded and reported, not enforced: the base dir's file system has no project quota", "base", cfg.BaseDir, "why", err.Error())
	} else {
		d.quota = true
		cfg.Log.Info("volume capacity is enforced: a project quota per volume", "base", cfg.BaseDir)
	}
	if cfg.DaemonCgroup != "" {
		cg, err := openDaemonCgroups(cfg.DaemonCgroup)
		if err != nil {
			return nil, err
		}
		d.cg = cg
	}
	return d, nil
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Listen opens the endpoint, "unix:///path/csi.sock" (or a bare path). A
// stale socket left by a killed plugin is removed first: the new plugin
// replaces the old one at the same address.
func Listen(endpoint string) (net.Listener, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok && strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("endpoint %q: only unix:// endpoints are served", endpoint)
	}
	if path == "" {
		return nil, fmt.Errorf("endpoint %q: no socket path", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("endpoint %q: remove the stale socket: %w", endpoint, err)
	}
	return net.Listen("unix", path)
}

// Server returns a gRPC server with the three services registered; every
// failed call is logged with its method and status.
func (d *Driver) Server() *grpc.Server {
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logErrors))
	csi.RegisterIdentityServer(srv, identityServer{Driver: d})
	csi.RegisterControllerServer(srv, controllerServer{Driver: d})
	csi.RegisterNodeServer(srv, nodeServer{Driver: d})
	return srv
}

func (d *Driver) logErrors(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		st, _ := status.FromError(err)
		d.cfg.Log.Warn("call failed", "method", info.FullMethod, "code", st.Code().String(), "error", st.Message())
	}
	return resp, err
}

// Recover logs the realmfs mounts of volumes that outlived a previous
// plugin: they go on serving, and NodeUnpublishVolume or
// NodeGetVolumeStats find them by mountinfo as they find any other.
func (d *Driver) Recover() {
	if d.cg != nil {
		removed, kept := d.cg.sweep()
		d.cfg.Log.Info("daemon cgroups", "dir", d.cg.dir, "removed empty", removed, "kept", kept)
	}
	mounts, err := d.volumeMounts("")
	if err != nil {
		d.cfg.Log.Warn("list realmfs mounts", "error", err)
		return
	}
	for _, m := range mounts {
		id, live := filepath.Base(m.Source), answers(m.Mountpoint)
		d.cfg.Log.Info("found a mount of a previous plugin", "volume", id, "target", m.Mountpoint, "answering", live)
		if live {
			d.forwardAudit(id, d.readPublishState(id).Pod, auditSize(d.auditPath(id)))
		}
	}
}

// Close stops forwarding audit logs, after forwarding what they hold.
// The mounts stay.
func (d *Driver) Close() {
	d.fwd.mu.Lock()
	ids := make([]string, 0, len(d.fwd.byID))
	for id := range d.fwd.byID {
		ids = append(ids, id)
	}
	d.fwd.mu.Unlock()
	for _, id := range ids {
		d.stopAudit(id)
	}
}

// errf is a gRPC status error.
func errf(c codes.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}
