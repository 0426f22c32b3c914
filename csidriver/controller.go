package csidriver

import (
	"context"
	"maps"
	"os"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// ControllerGetCapabilities: volumes are made, deleted and listed; the
// free space of the base dir is reported; several writers on one node are
// served (one mount, one lock table).
func (d controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// CreateVolume makes the workspace directory of a volume and records what
// was asked. The name is the id. A second call with the same name and a
// compatible request returns the same volume; an incompatible one is
// AlreadyExists. The capacity is recorded and reported, and enforced
// where the base dir's file system has project quotas: the directory is a
// project of its own with the capacity as its limit (quota.go); a second
// call applies the same again.
func (d controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, errf(codes.InvalidArgument, "a volume name is required")
	}
	if !validID.MatchString(name) {
		return nil, errf(codes.InvalidArgument, "volume name %q: want at most 128 letters, digits, '_' or '-', not starting with '_' or '-'", name)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, errf(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	if params, err := d.checkParams(req.GetParameters()); err != nil {
		return nil, err
	} else if params.size != 0 {
		return nil, errf(codes.InvalidArgument, "parameter size is an inline ephemeral volume's: a PersistentVolume's size is its claim's storage request")
	}
	capacity, err := capacityOf(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}

	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	r, err := d.readRecord(name)
	switch {
	case err == nil:
		if !compatible(r, req.GetCapacityRange(), req.GetParameters()) {
			return nil, errf(codes.AlreadyExists, "volume %s exists with capacity %d and other parameters or capacity than asked", name, r.CapacityBytes)
		}
		if err := d.reapplyQuota(r); err != nil {
			return nil, err
		}
	case isNotExist(err):
		r = &record{Name: name, CapacityBytes: capacity, Parameters: req.GetParameters(), Created: time.Now().UTC()}
		if err := d.makeVolume(r); err != nil {
			return nil, err
		}
	default:
		return nil, errf(codes.Internal, "%v", err)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: name, CapacityBytes: r.CapacityBytes, VolumeContext: r.Parameters,
	}}, nil
}

// makeVolume makes the directory and its quota, then the record (with the
// project id): a crash between the two leaves a directory without a
// record, which ListVolumes does not list and the retried CreateVolume
// takes over (a project id set on it is set again, the one allocated
// then). The directory is writable by every
// uid: its pods' users are not known here, and the kubelet is not to
// chown the workspace for a pod's fsGroup (fsGroupPolicy None: realmfs
// refuses a chown of a credential, which would fail the pod's start).
func (d controllerServer) makeVolume(r *record) error {
	dir := d.volumeDir(r.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errf(codes.Internal, "make %s: %v", dir, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return errf(codes.Internal, "chmod %s: %v", dir, err)
	}
	if err := d.applyQuota(r); err != nil {
		return err
	}
	if err := d.writeRecord(r); err != nil {
		return errf(codes.Internal, "record volume %s: %v", r.Name, err)
	}
	return nil
}

// capacityOf is the capacity a range asks for: the required bytes, else the
// limit, else 0 (unknown).
func capacityOf(cr *csi.CapacityRange) (int64, error) {
	req, limit := cr.GetRequiredBytes(), cr.GetLimitBytes()
	if req < 0 || limit < 0 {
		return 0, errf(codes.InvalidArgument, "negative capacity range")
	}
	if limit > 0 && req > limit {
		return 0, errf(codes.OutOfRange, "required bytes %d exceed the limit %d", req, limit)
	}
	if req > 0 {
		return req, nil
	}
	return limit, nil
}

// compatible reports whether the recorded volume r answers a new request
// for the same name.
func compatible(r *record, cr *csi.CapacityRange, params map[string]string) bool {
	if r.CapacityBytes < cr.GetRequiredBytes() {
		return false
	}
	if l := cr.GetLimitBytes(); l > 0 && r.CapacityBytes > l {
		return false
	}
	return maps.Equal(r.Parameters, params)
}

// DeleteVolume removes a volume's quota limit, its record and its
// workspace. An unknown id is not an error (it may have been deleted
// already). A volume still mounted on this node is FailedPrecondition:
// its pods are using it. The limit goes first: if that fails, the record
// is still there for the retried call to find the project by.
func (d controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, errf(codes.InvalidArgument, "a volume id is required")
	}
	if !validID.MatchString(id) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	mounts, err := d.volumeMounts(id)
	if err != nil {
		return nil, errf(codes.Internal, "%v", err)
	}
	if len(mounts) > 0 {
		return nil, errf(codes.FailedPrecondition, "volume %s is still mounted at %s", id, mounts[0].Mountpoint)
	}
	if r, err := d.readRecord(id); err == nil {
		if err := d.clearQuota(r); err != nil {
			return nil, err
		}
	}
	for _, p := range []string{d.recordPath(id), d.writerPath(id)} {
		if err := os.Remove(p); err != nil && !isNotExist(err) {
			return nil, errf(codes.Internal, "remove %s: %v", p, err)
		}
	}
	if err := os.RemoveAll(d.volumeDir(id)); err != nil {
		return nil, errf(codes.Internal, "remove %s: %v", d.volumeDir(id), err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities realmfs serves.
func (d controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, errf(codes.InvalidArgument, "a volume id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, errf(codes.InvalidArgument, "volume capabilities are required")
	}
	if _, err := d.readRecord(id); isNotExist(err) {
		return nil, errf(codes.NotFound, "volume %s does not exist", id)
	} else if err != nil {
		return nil, errf(codes.Internal, "%v", err)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	if _, err := d.checkParams(req.GetParameters()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ListVolumes lists the recorded volumes in name order. The token is the
// index of the next entry; one past the end, or not a number, is Aborted
// as the spec asks.
func (d controllerServer) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, errf(codes.InvalidArgument, "max_entries %d is negative", req.GetMaxEntries())
	}
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	ids, err := d.listRecords()
	if err != nil {
		return nil, errf(codes.Internal, "%v", err)
	}
	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		if start, err = strconv.Atoi(tok); err != nil || start < 0 || start > len(ids) {
			return nil, errf(codes.Aborted, "starting token %q is not one this plugin gave", tok)
		}
	}
	end := len(ids)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	resp := &csi.ListVolumesResponse{}
	for _, id := range ids[start:end] {
		r, err := d.readRecord(id)
		if err != nil {
			continue // deleted meanwhile, or not readable: not a volume to offer
		}
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{
			VolumeId: id, CapacityBytes: r.CapacityBytes, VolumeContext: r.Parameters,
		}})
	}
	if end < len(ids) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

// GetCapacity is the space free for workspaces: the base dir's file
// system's available bytes (0 for capabilities realmfs does not serve).
func (d controllerServer) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if len(req.GetVolumeCapabilities()) > 0 && checkCapabilities(req.GetVolumeCapabilities()) != nil {
		return &csi.GetCapacityResponse{}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d.cfg.BaseDir, &st); err != nil {
		return nil, errf(codes.Internal, "statfs %s: %v", d.cfg.BaseDir, err)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: int64(st.Bavail) * st.Bsize}, nil
}
