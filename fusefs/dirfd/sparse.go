package dirfd

import "golang.org/x/sys/unix"

// CopySparse fills dst, an empty file, with the first size bytes of src:
// copy_file_range of each data extent that SEEK_DATA and SEEK_HOLE find in
// src, then dst's size set to where src ends (at most size), so that src's
// holes stay holes in dst instead of being written out as zeros. A
// filesystem without SEEK_DATA has its whole file copied. If src shrinks
// meanwhile, dst keeps what there was.
func CopySparse(dst, src int, size int64) error {
	for off := int64(0); off < size; {
		data, err := ignoringEINTR2(func() (int64, error) { return unix.Seek(src, off, unix.SEEK_DATA) })
		if err == unix.ENXIO {
			break // no data past off: the rest is a hole
		}
		if err != nil {
			return copyRange(dst, src, off, size) // no SEEK_DATA here
		}
		if data >= size {
			break
		}
		hole, err := ignoringEINTR2(func() (int64, error) { return unix.Seek(src, data, unix.SEEK_HOLE) })
		if err != nil {
			return err
		}
		end := min(hole, size)
		if err := copyRange(dst, src, data, end); err != nil {
			return err
		}
		off = end
	}
	var st, dt unix.Stat_t
	if err := Fstat(src, &st); err != nil {
		return err
	}
	if err := Fstat(dst, &dt); err != nil {
		return err
	}
	if end := min(size, st.Size); dt.Size < end {
		return ignoringEINTR(func() error { return unix.Ftruncate(dst, end) })
	}
	return nil
}

// copyRange copies the bytes [from, to) of src to the same offsets of dst
// with copy_file_range; it stops early where src ends.
func copyRange(dst, src int, from, to int64) error {
	for off := from; off < to; {
		in, out := off, off
		n, err := ignoringEINTR2(func() (int, error) {
			return unix.CopyFileRange(src, &in, dst, &out, int(min(to-off, 1<<30)), 0)
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // src shrank meanwhile: keep what there is
		}
		off += int64(n)
	}
	return nil
}
