package qlog

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	// rotatedLayout is the suffix of a rotated file: <path>.<UTC time>.
	rotatedLayout = "20060102T150405.000"
	// reopenInterval is how often a file that failed is opened again.
	reopenInterval = time.Second
	fileMode       = 0o640
)

// fileOut appends lines to a file and rotates it by size and age: the file
// is renamed to <path>.<UTC time of the rotation> and a new one is opened;
// only the newest Keep rotated files are kept. Lines count as written when
// a flush succeeds.
type fileOut struct {
	cfg FileConfig
	now func() time.Time

	f       *os.File // nil after a failure, until reopened
	w       *bufio.Writer
	size    int64     // bytes in the file, including those buffered
	opened  time.Time // when this process opened it: its age starts here
	pending uint64    // lines in w since the last flush
	retryAt time.Time // when to open it again after a failure
	lastRot time.Time // the last rotation's timestamp, to keep names unique
}

// openFile opens cfg.Path for appending. A missing directory is a
// configuration error: it is not created.
func openFile(cfg FileConfig, now func() time.Time) (*fileOut, error) {
	dir := filepath.Dir(cfg.Path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("log.file.path %q: directory %q does not exist", cfg.Path, dir)
	case err != nil:
		return nil, fmt.Errorf("log.file.path %q: %w", cfg.Path, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("log.file.path %q: %q is not a directory", cfg.Path, dir)
	}
	o := &fileOut{cfg: cfg, now: now}
	if err := o.open(); err != nil {
		return nil, fmt.Errorf("log.file.path: %w", err)
	}
	return o, nil
}

func (o *fileOut) open() error {
	f, err := os.OpenFile(o.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if fi.IsDir() {
		f.Close()
		return fmt.Errorf("%s is a directory", o.cfg.Path)
	}
	o.f, o.size, o.opened = f, fi.Size(), o.now()
	if o.w == nil {
		o.w = bufio.NewWriterSize(f, streamBuffer)
	} else {
		o.w.Reset(f)
	}
	return nil
}

func (o *fileOut) write(s *sink, b *batch) bool {
	now := o.now()
	if o.f == nil && !o.reopen(s, now) {
		s.errors.Add(uint64(b.lines()))
		return false
	}
	start := 0
	for i, end := range b.ends {
		line := b.buf[start:end]
		start = end
		if o.size > 0 && (o.size+int64(len(line)) > o.cfg.MaxSize || o.cfg.MaxAge > 0 && now.Sub(o.opened) >= o.cfg.MaxAge) {
			o.rotate(s, now)
			if o.f == nil {
				s.errors.Add(uint64(b.lines() - i))
				return false
			}
		}
		if _, err := o.w.Write(line); err != nil {
			o.fail(s, now, err, uint64(b.lines()-i))
			return false
		}
		o.size += int64(len(line))
		o.pending++
	}
	return true
}

func (o *fileOut) flush(s *sink) {
	if o.f == nil {
		return
	}
	if err := o.w.Flush(); err != nil {
		o.fail(s, o.now(), err, 0)
		return
	}
	s.written.Add(o.pending)
	o.pending = 0
}

// fail counts the lines lost to err and closes the file; it is opened
// again after reopenInterval.
func (o *fileOut) fail(s *sink, now time.Time, err error, lost uint64) {
	s.errors.Add(o.pending + lost)
	o.pending = 0
	o.w.Reset(nil)
	o.f.Close()
	o.f = nil
	o.retryAt = now.Add(reopenInterval)
	s.warn(fmt.Sprintf("writing %s failed; check the disk and the permissions of log.file.path", o.cfg.Path), err)
}

func (o *fileOut) reopen(s *sink, now time.Time) bool {
	if now.Before(o.retryAt) {
		return false
	}
	if err := o.open(); err != nil {
		o.retryAt = now.Add(reopenInterval)
		s.warn(fmt.Sprintf("cannot open %s; check that its directory exists and is writable", o.cfg.Path), err)
		return false
	}
	return true
}

// rotate renames the file and opens a new one. If the rename fails the
// same file goes on, with its size and age counted from now, so that the
// rename is not tried for every line.
func (o *fileOut) rotate(s *sink, now time.Time) {
	o.flush(s)
	if o.f == nil {
		return
	}
	if err := o.f.Close(); err != nil {
		s.warn(fmt.Sprintf("closing %s for rotation failed", o.cfg.Path), err)
	}
	o.f = nil
	if err := os.Rename(o.cfg.Path, o.rotatedName(now)); err != nil {
		s.warn(fmt.Sprintf("cannot rotate %s", o.cfg.Path), err)
		if o.reopen(s, now) {
			o.size, o.opened = 0, now
		}
		return
	}
	if o.reopen(s, now) {
		o.prune(s)
	}
}

// rotatedName returns a name for the file rotated at now that no other
// rotated file has: timestamps are only milliseconds, so a name taken is
// moved on by a millisecond.
func (o *fileOut) rotatedName(now time.Time) string {
	t := now.UTC().Truncate(time.Millisecond)
	if !t.After(o.lastRot) {
		t = o.lastRot.Add(time.Millisecond)
	}
	for range 1000 {
		if _, err := os.Lstat(o.cfg.Path + "." + t.Format(rotatedLayout)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		t = t.Add(time.Millisecond)
	}
	o.lastRot = t
	return o.cfg.Path + "." + t.Format(rotatedLayout)
}

// prune removes all but the newest Keep rotated files.
func (o *fileOut) prune(s *sink) {
	rotated, err := rotatedFiles(o.cfg.Path)
	if err != nil {
		s.warn("cannot list rotated files", err)
		return
	}
	if len(rotated) <= o.cfg.Keep {
		return
	}
	for _, name := range rotated[:len(rotated)-o.cfg.Keep] {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.warn("cannot remove an old rotated file", err)
		}
	}
}

// rotatedFiles returns the rotated files of path, oldest first.
func rotatedFiles(path string) ([]string, error) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+"."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		suffix, ok := strings.CutPrefix(name, prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if _, err := time.Parse(rotatedLayout, suffix); err != nil {
			continue
		}
		names = append(names, filepath.Join(dir, name))
	}
	slices.Sort(names) // the layout sorts by time
	return names, nil
}

func (o *fileOut) close(s *sink) {
	o.flush(s)
	if o.f != nil {
		if err := o.f.Close(); err != nil {
			s.warn("closing the file failed", err)
		}
		o.f = nil
	}
}
