package csidriver

import (
	"context"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// NodeGetVolumeStats reports the usage of the volume's file system (statfs
// of the workspace directory, not of the mount: a dead daemon cannot
// answer), or in bytes its project quota's where it has one, and the
// mount's health: abnormal when the path is not a realmfs
// mount of the volume or its daemon does not answer, so that the CO can
// tell and the next publish mounts it again.
func (d nodeServer) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if id == "" {
		return nil, errf(codes.InvalidArgument, "a volume id is required")
	}
	if path == "" {
		return nil, errf(codes.InvalidArgument, "a volume path is required")
	}
	dir := d.volumeDir(id)
	if !validID.MatchString(id) {
		return nil, errf(codes.NotFound, "volume %q does not exist", id)
	}
	if _, err := os.Stat(dir); isNotExist(err) {
		return nil, errf(codes.NotFound, "volume %s does not exist", id)
	}
	cond, err := d.condition(id, path)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, errf(codes.Internal, "statfs %s: %v", dir, err)
	}
	bytes, err := d.bytesUsage(id, &st)
	if err != nil {
		return nil, err
	}
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			bytes,
			{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
		},
		VolumeCondition: cond,
	}, nil
}

// bytesUsage is the volume's usage in bytes: its project quota's, the
// limit as the total and the project's usage as the used, where the
// volume has a limit; else its file system's (st). What is available is
// no more than the file system has free.
func (d nodeServer) bytesUsage(id string, st *unix.Statfs_t) (*csi.VolumeUsage, error) {
	bs := st.Bsize
	fsAvail := int64(st.Bavail) * bs
	u := &csi.VolumeUsage{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: fsAvail, Used: int64(st.Blocks-st.Bfree) * bs}
	if !d.quota {
		return u, nil
	}
	project := d.readPublishState(id).ProjectID // an ephemeral volume's
	if r, err := d.readRecord(id); err == nil && r.ProjectID != 0 {
		project = r.ProjectID
	}
	if project == 0 {
		return u, nil // no record (deleted meanwhile), or no project: the file system's figures
	}
	limit, used, err := projectUsage(d.volumeDir(id), project)
	if err != nil {
		return nil, errf(codes.Internal, "volume %s: %v", id, err)
	}
	if limit == 0 {
		return u, nil
	}
	return &csi.VolumeUsage{Unit: csi.VolumeUsage_BYTES, Total: limit, Used: used, Available: min(max(limit-used, 0), fsAvail)}, nil
}

// condition is the health of the volume's publish at path; NotFound when
// nothing of the volume is there.
func (d nodeServer) condition(id, path string) (*csi.VolumeCondition, error) {
	m, err := mountAt(path)
	if err != nil {
		return nil, errf(codes.Internal, "read mountinfo: %v", err)
	}
	if m == nil {
		if _, err := os.Lstat(path); isNotExist(err) {
			return nil, errf(codes.NotFound, "volume %s is not published at %s", id, path)
		}
		return &csi.VolumeCondition{Abnormal: true, Message: fmt.Sprintf("%s is not a realmfs mount", path)}, nil
	}
	if m.Source != d.volumeDir(id) {
		return nil, errf(codes.NotFound, "%s serves %s, not volume %s", path, m.Source, id)
	}
	if !answers(path) {
		return &csi.VolumeCondition{Abnormal: true, Message: "the realmfs daemon of this mount does not answer (it died): the next publish mounts it again"}, nil
	}
	return &csi.VolumeCondition{Message: "realmfs serves the workspace"}, nil
}
