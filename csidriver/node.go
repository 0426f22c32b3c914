package csidriver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// NodeGetInfo names the node; no topology and no volume limit.
func (d nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.cfg.NodeID}, nil
}

// NodeGetCapabilities: usage and the health of a mount are reported, and
// several writers on this node share one mount. No stage step: a realmfs
// mount is made per target.
func (d nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_VOLUME_CONDITION,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// publishRequest is a checked NodePublishVolume request.
type publishRequest struct {
	id, target, dir string
	params          volumeParams
	readOnly        bool
	ephemeral       bool
	mountFlags      []string
	pod             podInfo
}

func (d nodeServer) checkPublish(req *csi.NodePublishVolumeRequest) (*publishRequest, error) {
	if req.GetVolumeId() == "" {
		return nil, errf(codes.InvalidArgument, "a volume id is required")
	}
	if req.GetTargetPath() == "" {
		return nil, errf(codes.InvalidArgument, "a target path is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if !validID.MatchString(req.GetVolumeId()) {
		return nil, errf(codes.NotFound, "volume %q does not exist", req.GetVolumeId())
	}
	target, err := cleanTarget(req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	params, err := d.checkParams(req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	if err := checkMountFlags(req.GetVolumeCapability().GetMount().GetMountFlags()); err != nil {
		return nil, err
	}
	ephemeral := req.GetVolumeContext()[ephemeralKey] == "true"
	if err := d.checkSize(params.size, ephemeral); err != nil {
		return nil, err
	}
	return &publishRequest{
		id: req.GetVolumeId(), target: target, dir: d.volumeDir(req.GetVolumeId()), params: params,
		readOnly:   req.GetReadonly() || readOnlyMode(req.GetVolumeCapability()),
		ephemeral:  ephemeral,
		mountFlags: req.GetVolumeCapability().GetMount().GetMountFlags(),
		pod:        podFrom(req.GetVolumeContext()),
	}, nil
}

// cleanTarget makes target absolute and its parent symlink-free, as
// mountinfo shows mountpoints.
func cleanTarget(target string) (string, error) {
	if !filepath.IsAbs(target) {
		return "", errf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	target = filepath.Clean(target)
	if parent, err := filepath.EvalSymlinks(filepath.Dir(target)); err == nil {
		target = filepath.Join(parent, filepath.Base(target))
	}
	return target, nil
}

// NodePublishVolume mounts the volume's workspace at the target through
// realmfs with the volume's policy and options. A target already served by
// realmfs for this volume is left as it is; one whose daemon died is
// detached and mounted again. A second target of a volume already mounted
// on this node is a bind mount of the first, so that every pod on the node
// shares one daemon and one lock table. An ephemeral inline volume's
// workspace is made here and removed by NodeUnpublishVolume.
func (d nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	p, err := d.checkPublish(req)
	if err != nil {
		return nil, err
	}
	d.nodeMu.Lock()
	defer d.nodeMu.Unlock()
	if done, err := d.published(p); err != nil {
		return nil, err
	} else if done {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := d.prepareWorkspace(p); err != nil {
		return nil, err
	}
	if !p.readOnly {
		if err := d.claimWriter(p.id); err != nil {
			return nil, err
		}
	}
	if err := d.mount(ctx, p); err != nil {
		// A failed publish holds no claim and leaves no ephemeral workspace.
		_ = d.releaseIfUnmounted(ctx, p.id)
		_ = d.dropEphemeral(p.id)
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// mount mounts the volume at the target: a bind of a live mount of it on
// this node, else a new realmfs daemon.
func (d nodeServer) mount(ctx context.Context, p *publishRequest) error {
	if err := os.MkdirAll(p.target, 0o750); err != nil {
		return errf(codes.Internal, "make the target %s: %v", p.target, err)
	}
	if src := d.liveMount(p); src != "" {
		if err := bindMount(src, p.target, p.readOnly); err != nil {
			return errf(codes.Internal, "bind %s (volume %s) at %s: %v", src, p.id, p.target, err)
		}
		return nil
	}
	args, err := d.realmfsArgs(p)
	if err != nil {
		return err
	}
	offset := auditSize(d.auditPath(p.id)) // the lines of earlier daemons are not this pod's
	if err := d.startRealmfs(ctx, p.id, args); err != nil {
		var re *realmfsError
		if errors.As(err, &re) && re.usage() {
			return errf(codes.InvalidArgument, "%v", err)
		}
		return errf(codes.Internal, "%v", err)
	}
	d.leaveV1(ctx, p.id, p.target)
	d.forwardAudit(p.id, p.pod, offset)
	return nil
}

// releaseIfUnmounted stops forwarding the volume's audit log, removes
// its daemon cgroup and gives up this node's writer claim once no mount of
// the volume is left on the node (its daemon has exited: its last lines
// are in). The cgroup's removal waits for the daemon's exit when its pid
// was unknown (a daemon whose control socket did not answer).
func (d nodeServer) releaseIfUnmounted(ctx context.Context, id string) error {
	if !validID.MatchString(id) {
		return nil
	}
	if rest, err := d.volumeMounts(id); err != nil || len(rest) > 0 {
		return nil
	}
	if d.cg != nil {
		if err := d.cg.remove(ctx, id); err != nil {
			return errf(codes.Internal, "%v", err)
		}
	}
	d.stopAudit(id)
	return d.releaseWriter(id)
}

// published reports whether the target already serves the volume as
// asked. A realmfs mount of the volume whose daemon died is detached (a
// new one is mounted by the caller); anything else at the target is
// AlreadyExists.
func (d nodeServer) published(p *publishRequest) (bool, error) {
	m, err := mountAt(p.target)
	if err != nil {
		return false, errf(codes.Internal, "read mountinfo: %v", err)
	}
	if m == nil {
		if isMountPoint(p.target) {
			return false, errf(codes.AlreadyExists, "the target %s holds another file system", p.target)
		}
		return false, nil
	}
	if m.Source != p.dir {
		return false, errf(codes.AlreadyExists, "the target %s serves %s, not volume %s", p.target, m.Source, p.id)
	}
	if !answers(p.target) {
		d.cfg.Log.Warn("the realmfs daemon of a target died; mounting it again", "volume", p.id, "target", p.target)
		if err := unmount(p.target); err != nil {
			return false, errf(codes.Internal, "%v", err)
		}
		return false, nil
	}
	if hasOpt(m.Options, "ro") != p.readOnly {
		return false, errf(codes.AlreadyExists, "volume %s is published at %s with readonly=%v", p.id, p.target, !p.readOnly)
	}
	return true, nil
}

// hasOpt reports whether the comma-separated options hold opt.
func hasOpt(options, opt string) bool {
	return slices.Contains(strings.Split(options, ","), opt)
}

// liveMount returns an answering realmfs mount of the volume on this node
// that the target can share (not a read-only one for a writer), or "".
func (d nodeServer) liveMount(p *publishRequest) string {
	mounts, err := d.volumeMounts(p.id)
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		if m.Mountpoint != p.target && answers(m.Mountpoint) && (p.readOnly || !hasOpt(m.VFSOptions, "ro")) {
			return m.Mountpoint
		}
	}
	return ""
}

// bindMount binds src at target (read-only if asked: the bind alone, not
// the shared mount).
func bindMount(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if readOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return err
		}
	}
	return nil
}

// NodeUnpublishVolume unmounts the target and, when it was the daemon's
// last mount, waits until the daemon has exited (it finishes its commits
// first), then removes the target. An ephemeral volume's workspace goes
// with its last mount. A target that is not mounted, or not there, is
// already unpublished.
func (d nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if id == "" {
		return nil, errf(codes.InvalidArgument, "a volume id is required")
	}
	if target == "" {
		return nil, errf(codes.InvalidArgument, "a target path is required")
	}
	target, err := cleanTarget(target)
	if err != nil {
		return nil, err
	}
	d.nodeMu.Lock()
	defer d.nodeMu.Unlock()
	m, err := mountAt(target)
	if err != nil {
		return nil, errf(codes.Internal, "read mountinfo: %v", err)
	}
	if m != nil {
		if m.Source != d.volumeDir(id) {
			return nil, errf(codes.FailedPrecondition, "the target %s serves %s, not volume %s", target, m.Source, id)
		}
		if err := d.unmountTarget(ctx, id, m); err != nil {
			return nil, err
		}
	}
	if err := d.releaseIfUnmounted(ctx, id); err != nil {
		return nil, err
	}
	if err := os.Remove(target); err != nil && !isNotExist(err) {
		return nil, errf(codes.Internal, "remove the target %s: %v", target, err)
	}
	if err := d.dropEphemeral(id); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// unmountTarget unmounts m and, if no other mount of the same daemon (the
// same device) is left, waits for the daemon to exit.
func (d nodeServer) unmountTarget(ctx context.Context, id string, m *mountinfo.Info) error {
	var w *pidWaiter
	if answers(m.Mountpoint) {
		pid, err := d.daemonPid(ctx, m.Mountpoint)
		if err == nil {
			w, err = openPid(pid)
		}
		if err != nil && d.cg != nil {
			d.cfg.Log.Warn("the daemon's pid is unknown; waiting for its cgroup to empty", "target", m.Mountpoint, "error", err)
		} else if err != nil {
			d.cfg.Log.Warn("the daemon's pid is unknown; not waiting for it", "target", m.Mountpoint, "error", err)
		}
	}
	if err := unmount(m.Mountpoint); err != nil {
		if w != nil {
			unix.Close(w.fd)
		}
		return errf(codes.Internal, "%v", err)
	}
	if w == nil {
		return nil
	}
	if rest, err := d.volumeMounts(id); err == nil && slices.ContainsFunc(rest, func(o *mountinfo.Info) bool {
		return o.Major == m.Major && o.Minor == m.Minor
	}) {
		unix.Close(w.fd)
		return nil // the daemon serves the volume's other targets
	}
	ctx, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	if err := w.wait(ctx); err != nil {
		return errf(codes.Internal, "%v", err)
	}
	return nil
}
