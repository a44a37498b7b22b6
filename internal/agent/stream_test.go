package agent

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// sizes records the size of every write.
type sizes struct {
	bytes.Buffer
	writes []int
}

func (s *sizes) Write(p []byte) (int, error) {
	s.writes = append(s.writes, len(p))
	return s.Buffer.Write(p)
}

func TestCopyBlocksWritesWholeBlocks(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16,000 bytes
	// A TLS body or a pipe hands out small pieces; the writes must not
	// follow them.
	src := iotest.HalfReader(bytes.NewReader(data))
	var dst sizes
	n, err := copyBlocks(&dst, src, make([]byte, 4096))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("copyBlocks = %d, %v; want %d, nil", n, err, len(data))
	}
	if !bytes.Equal(dst.Bytes(), data) {
		t.Fatal("the copy differs from the source")
	}
	want := []int{4096, 4096, 4096, 16000 - 3*4096}
	if len(dst.writes) != len(want) {
		t.Fatalf("writes %v, want %v", dst.writes, want)
	}
	for i := range want {
		if dst.writes[i] != want[i] {
			t.Fatalf("writes %v, want %v", dst.writes, want)
		}
	}
}

func TestCopyBlocksErrors(t *testing.T) {
	cut := errors.New("cut")
	// A read error comes back after what was read before it is written.
	src := io.MultiReader(bytes.NewReader(make([]byte, 100)), iotest.ErrReader(cut))
	var dst bytes.Buffer
	n, err := copyBlocks(&dst, src, make([]byte, 4096))
	if !errors.Is(err, cut) || n != 100 || dst.Len() != 100 {
		t.Fatalf("read error: copyBlocks = %d, %v (%d written); want 100, cut", n, err, dst.Len())
	}
	// A write error stops the copy.
	pr, pw := io.Pipe()
	_ = pr.CloseWithError(cut)
	n, err = copyBlocks(pw, bytes.NewReader(make([]byte, 10000)), make([]byte, 4096))
	if !errors.Is(err, cut) || n != 0 {
		t.Fatalf("write error: copyBlocks = %d, %v; want 0, cut", n, err)
	}
	// An empty source is no error.
	if n, err := copyBlocks(&dst, bytes.NewReader(nil), make([]byte, 16)); n != 0 || err != nil {
		t.Fatalf("empty: copyBlocks = %d, %v", n, err)
	}
}

// The transport copies a request body with io.Copy after unwrapping
// Restore's io.NopCloser: the block size holds only while a NopCloser
// still offers blockReader's WriteTo.
func TestBlockReaderKeepsWriteToThroughNopCloser(t *testing.T) {
	if _, ok := io.NopCloser(blockReader{bytes.NewReader(nil)}).(io.WriterTo); !ok {
		t.Fatal("io.NopCloser(blockReader) is no io.WriterTo: the restore body would go in 32 KiB chunks")
	}
	data := bytes.Repeat([]byte{7}, streamBlock+10)
	var dst sizes
	n, err := io.Copy(&dst, io.NopCloser(blockReader{iotest.HalfReader(bytes.NewReader(data))}))
	if err != nil || n != int64(len(data)) || !bytes.Equal(dst.Bytes(), data) {
		t.Fatalf("io.Copy = %d, %v", n, err)
	}
	if len(dst.writes) != 2 || dst.writes[0] != streamBlock {
		t.Fatalf("writes %v, want [%d 10]", dst.writes, streamBlock)
	}
}
