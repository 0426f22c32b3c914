package csidriver

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// oneWriterNode is why a volume is never written from two nodes: the
// lock table that makes concurrent writers safe lives in the one realmfs
// daemon serving the mount, and a mount on a second node would have a
// second, blind, table.
const oneWriterNode = "a realm volume has one writer node: its lock table lives in the realmfs mount of that node, and a mount on a second node would keep a second table that does not see the first's locks (use a SINGLE_NODE_* mode, or MULTI_NODE_READER_ONLY)"

// checkCapability refuses what realmfs cannot serve: block volumes, a
// file system type other than realmfs, and writers on several nodes.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return errf(codes.InvalidArgument, "a volume capability is required")
	}
	if c.GetBlock() != nil {
		return errf(codes.InvalidArgument, "block volumes are not served: realmfs is a file system")
	}
	m := c.GetMount()
	if m == nil {
		return errf(codes.InvalidArgument, "the access type must be mount")
	}
	if fs := m.GetFsType(); fs != "" && fs != "realmfs" && fs != "fuse.realmfs" {
		return errf(codes.InvalidArgument, "fs_type %q: a realm volume is a realmfs mount", fs)
	}
	switch mode := c.GetAccessMode().GetMode(); mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return nil
	case csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return errf(codes.InvalidArgument, "access mode %s: %s", mode, oneWriterNode)
	default:
		return errf(codes.InvalidArgument, "access mode %s: unknown", mode)
	}
}

// checkCapabilities checks every capability of a request; at least one
// is required.
func checkCapabilities(cs []*csi.VolumeCapability) error {
	if len(cs) == 0 {
		return errf(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range cs {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyMode reports whether c's access mode only reads.
func readOnlyMode(c *csi.VolumeCapability) bool {
	switch c.GetAccessMode().GetMode() {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return true
	}
	return false
}
