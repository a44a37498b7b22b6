package qlog

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"zero", Config{}, ""},
		{"full stdout", Config{Statements: "full", Stdout: true}, ""},
		{"bad statements", Config{Statements: "x"}, `log.statements must be "masked" or "full", not "x"`},
		{"negative buffer", Config{Buffer: -1}, "log.buffer"},
		{"file without path", Config{File: &FileConfig{}}, "log.file.path is required"},
		{"file negative keep", Config{File: &FileConfig{Path: "x", Keep: -1}}, "log.file.keep"},
		{"kafka without brokers", Config{Kafka: &KafkaConfig{Topic: "t"}}, "log.kafka.brokers is required"},
		{"kafka bad broker", Config{Kafka: &KafkaConfig{Brokers: []string{"localhost"}, Topic: "t"}}, `"localhost" is not host:port`},
		{"kafka without topic", Config{Kafka: &KafkaConfig{Brokers: []string{"127.0.0.1:9092"}}}, "log.kafka.topic is required"},
		{"kafka compression", Config{Kafka: &KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Compression: "brotli"}},
			`log.kafka.compression must be one of none, gzip, snappy, lz4, zstd, not "brotli"`},
		{"kafka ok", Config{Kafka: &KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, Topic: "t", Compression: "zstd"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	if (Config{}).Enabled() {
		t.Error("zero Config is enabled")
	}
	if !(Config{Stdout: true}).Enabled() || !(Config{File: &FileConfig{}}).Enabled() || !(Config{Kafka: &KafkaConfig{}}).Enabled() {
		t.Error("a sink does not enable the log")
	}
}

func TestNewMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope", "q.log")
	_, err := New(Config{File: &FileConfig{Path: path}}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("New = %v, want a missing-directory error", err)
	}
}

func TestNewInvalid(t *testing.T) {
	if _, err := New(Config{Statements: "x"}, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	}
}
