package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// endless writes a backup stream until its writer fails.
type endless struct{}

func (endless) Backup(ctx context.Context, w io.Writer, _ BackupOptions) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := w.Write(buf)
		n += int64(k)
		if err != nil {
			return n, fmt.Errorf("agent backup: stream cut after %d bytes: %w", n, err)
		}
	}
}

// fullDisk reads some of the stream, then fails as a full disk does.
type fullDisk struct{}

func (fullDisk) Restore(_ context.Context, r io.Reader, _ RestoreOptions) (RestoreResult, error) {
	_, _ = io.CopyN(io.Discard, r, 1<<20)
	return RestoreResult{}, &Error{Status: http.StatusInsufficientStorage, Code: CodeNoSpace, Message: "the file system of /x ran out of space"}
}

// A restore that fails on its own stops the backup, and its error (not
// the backup's "stream cut") is the clone's, with its code.
func TestCloneRestoreFailsFirst(t *testing.T) {
	_, sent, err := Clone(context.Background(), endless{}, fullDisk{}, BackupOptions{}, RestoreOptions{})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeNoSpace || !strings.HasPrefix(err.Error(), "clone: restore: agent: the file system of /x ran out of space") {
		t.Fatalf("err = %v, want the restore's no_space first", err)
	}
	if sent < 1<<20 {
		t.Errorf("sent %d", sent)
	}
}
