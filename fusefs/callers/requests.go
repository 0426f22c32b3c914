// One method of go-fuse's RawFileSystem for each request a caller waits
// for, noting its thread. Not FORGET, RELEASE or RELEASEDIR: the kernel
// sends them on its own after a close, and no caller waits for them.

package callers

import "github.com/hanwen/go-fuse/v2/fuse"

func (f *FS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.Lookup(cancel, header, name, out)
}

func (f *FS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.GetAttr(cancel, input, out)
}

func (f *FS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.SetAttr(cancel, input, out)
}

func (f *FS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Mknod(cancel, input, name, out)
}

func (f *FS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Mkdir(cancel, input, name, out)
}

func (f *FS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.Unlink(cancel, header, name)
}

func (f *FS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.Rmdir(cancel, header, name)
}

func (f *FS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Rename(cancel, input, oldName, newName)
}

func (f *FS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Link(cancel, input, filename, out)
}

func (f *FS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
}

func (f *FS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.Readlink(cancel, header)
}

func (f *FS) Access(cancel <-chan struct{}, input *fuse.AccessIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Access(cancel, input)
}

func (f *FS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (f *FS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (f *FS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.SetXAttr(cancel, input, attr, data)
}

func (f *FS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	f.Seen.Note(header.Caller.Pid)
	return f.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (f *FS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Create(cancel, input, name, out)
}

func (f *FS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Tmpfile(cancel, input, out)
}

func (f *FS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Open(cancel, input, out)
}

func (f *FS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Read(cancel, input, buf)
}

func (f *FS) Lseek(cancel <-chan struct{}, input *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Lseek(cancel, input, out)
}

func (f *FS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.GetLk(cancel, input, out)
}

func (f *FS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.SetLk(cancel, input)
}

func (f *FS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.SetLkw(cancel, input)
}

func (f *FS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Write(cancel, input, data)
}

func (f *FS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Writev(cancel, input, data)
}

func (f *FS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.CopyFileRange(cancel, input)
}

func (f *FS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (f *FS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Flush(cancel, input)
}

func (f *FS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Fsync(cancel, input)
}

func (f *FS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Fallocate(cancel, input)
}

func (f *FS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.OpenDir(cancel, input, out)
}

func (f *FS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.ReadDir(cancel, input, out)
}

func (f *FS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.ReadDirPlus(cancel, input, out)
}

func (f *FS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.FsyncDir(cancel, input)
}

func (f *FS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.StatFs(cancel, input, out)
}

func (f *FS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	f.Seen.Note(input.Caller.Pid)
	return f.RawFileSystem.Statx(cancel, input, out)
}
