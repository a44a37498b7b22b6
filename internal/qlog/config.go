package qlog

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Statement text modes.
const (
	StatementsMasked = "masked" // normalised text, literals replaced by "?", error messages masked too
	StatementsFull   = "full"   // the text and messages as they were
)

// Defaults for zero fields.
const (
	DefaultBuffer           = 65536
	DefaultMaxStatement     = 64 << 10
	DefaultFileMaxSize      = 100 << 20
	DefaultFileKeep         = 5
	DefaultKafkaCompression = "lz4"
	DefaultKafkaClientID    = "vigil"
	DefaultKafkaMaxBuffered = 10000
	DefaultKafkaLinger      = 10 * time.Millisecond

	maxBuffer = 1 << 22
)

// Config is the query log's configuration (the "log" section). The zero
// value has no sink: [Config.Enabled] is false.
type Config struct {
	Statements string // "masked" (default, also for "") or "full"
	Buffer     int    // entries between data path and writer, default 65536 (rounded up to a power of two)
	// MaxStatement is the number of bytes of statement text kept per entry,
	// default 64 KiB; longer statements are truncated (before masking, which
	// still hides a literal cut in the middle) and marked "truncated":true.
	MaxStatement int
	File         *FileConfig
	Stdout       bool
	Kafka        *KafkaConfig
}

// FileConfig is the file sink: append to Path and rotate it.
type FileConfig struct {
	Path    string
	MaxSize int64         // bytes, 0 = 100 MiB
	MaxAge  time.Duration // 0 = never by age
	Keep    int           // rotated files kept, 0 = 5
}

// KafkaConfig is the Kafka sink.
type KafkaConfig struct {
	Brokers     []string // host:port
	Topic       string
	Compression string // "none", "gzip", "snappy", "lz4", "zstd"; default lz4
	ClientID    string // default "vigil"
	MaxBuffered int    // records buffered in the client, default 10000
	// Linger is how long the client waits for more records before sending
	// a batch; 0 = 10 ms.
	Linger time.Duration
}

// Enabled reports whether any sink is configured.
func (c Config) Enabled() bool {
	return c.File != nil || c.Stdout || c.Kafka != nil
}

// Validate checks the configuration and returns every problem found.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Statements {
	case "", StatementsMasked, StatementsFull:
	default:
		bad("log.statements must be %q or %q, not %q", StatementsMasked, StatementsFull, c.Statements)
	}
	if c.Buffer < 0 || c.Buffer > maxBuffer {
		bad("log.buffer must be between 1 and %d entries (0 for the default %d), not %d", maxBuffer, DefaultBuffer, c.Buffer)
	}
	if c.MaxStatement < 0 {
		bad("log.max_statement must not be negative, not %d", c.MaxStatement)
	}
	if f := c.File; f != nil {
		if f.Path == "" {
			bad("log.file.path is required when log.file is set")
		}
		if f.MaxSize < 0 {
			bad("log.file.max_size must not be negative, not %d", f.MaxSize)
		}
		if f.MaxAge < 0 {
			bad("log.file.max_age must not be negative, not %s", f.MaxAge)
		}
		if f.Keep < 0 {
			bad("log.file.keep must not be negative, not %d", f.Keep)
		}
	}
	if k := c.Kafka; k != nil {
		if len(k.Brokers) == 0 {
			bad("log.kafka.brokers is required when log.kafka is set (a list of host:port)")
		}
		for _, b := range k.Brokers {
			if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
				bad("log.kafka.brokers: %q is not host:port", b)
			}
		}
		if k.Topic == "" {
			bad("log.kafka.topic is required when log.kafka is set")
		}
		if _, err := compressionCodec(k.Compression); err != nil {
			errs = append(errs, err)
		}
		if k.MaxBuffered < 0 {
			bad("log.kafka.max_buffered must not be negative, not %d", k.MaxBuffered)
		}
		if k.Linger < 0 {
			bad("log.kafka.linger must not be negative, not %s", k.Linger)
		}
	}
	return errors.Join(errs...)
}

var compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "", "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("log.kafka.compression must be one of %s, not %q", strings.Join(compressions, ", "), name)
}

// withDefaults returns c with zero fields set to their defaults. c must be
// valid.
func (c Config) withDefaults() Config {
	if c.Statements == "" {
		c.Statements = StatementsMasked
	}
	if c.Buffer == 0 {
		c.Buffer = DefaultBuffer
	}
	if c.MaxStatement == 0 {
		c.MaxStatement = DefaultMaxStatement
	}
	if c.File != nil {
		f := *c.File
		if f.MaxSize == 0 {
			f.MaxSize = DefaultFileMaxSize
		}
		if f.Keep == 0 {
			f.Keep = DefaultFileKeep
		}
		c.File = &f
	}
	if c.Kafka != nil {
		k := *c.Kafka
		if k.Compression == "" {
			k.Compression = DefaultKafkaCompression
		}
		if k.ClientID == "" {
			k.ClientID = DefaultKafkaClientID
		}
		if k.MaxBuffered == 0 {
			k.MaxBuffered = DefaultKafkaMaxBuffered
		}
		if k.Linger == 0 {
			k.Linger = DefaultKafkaLinger
		}
		k.Brokers = append([]string(nil), k.Brokers...)
		c.Kafka = &k
	}
	return c
}
