package qlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// kafkaDeliveryTimeout fails a record that could not be delivered
	// for this long (brokers down): it counts as an error.
	kafkaDeliveryTimeout = 30 * time.Second
	// kafkaCloseFlush bounds how long Close waits for buffered records.
	kafkaCloseFlush = 2 * time.Second
	// kafkaSettle bounds how long Close waits, after closing the client,
	// for the promises of the records it failed.
	kafkaSettle = time.Second
)

// kafkaOut produces one record per line (without its '\n') with
// TryProduce, which never waits: when the client already buffers
// MaxBuffered records the line is dropped.
type kafkaOut struct {
	cl          *kgo.Client
	maxBuffered int64
	brokers     string
	outstanding atomic.Int64 // records produced whose promise has not run
}

func newKafkaOut(cfg KafkaConfig) (*kafkaOut, error) {
	codec, err := compressionCodec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedRecords(cfg.MaxBuffered),
		kgo.ProducerLinger(cfg.Linger),
		kgo.RecordDeliveryTimeout(kafkaDeliveryTimeout),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		return nil, fmt.Errorf("log.kafka: %w", err)
	}
	return &kafkaOut{cl: cl, maxBuffered: int64(cfg.MaxBuffered), brokers: strings.Join(cfg.Brokers, ",")}, nil
}

func (o *kafkaOut) write(s *sink, b *batch) bool {
	room := o.maxBuffered - o.cl.BufferedProduceRecords()
	n := b.lines()
	if int64(n) > room {
		if room < 0 {
			room = 0
		}
		s.dropped.Add(uint64(int64(n) - room))
		s.warn(fmt.Sprintf("the client's buffer is full (brokers %s slow or unreachable?); entries are dropped", o.brokers), nil)
		n = int(room)
	}
	if n == 0 {
		return false
	}
	if cap(b.recs) < n {
		b.recs = make([]kgo.Record, n, b.lines())
	}
	b.recs = b.recs[:n]
	if b.promise == nil {
		b.promise = func(_ *kgo.Record, err error) {
			o.settled(s, err)
			b.release()
		}
	}
	b.refs.Add(int32(n))
	o.outstanding.Add(int64(n))
	for i := range n {
		r := &b.recs[i]
		*r = kgo.Record{Value: b.line(i)}
		o.cl.TryProduce(context.Background(), r, b.promise)
	}
	return false
}

// settled counts the outcome of one record.
func (o *kafkaOut) settled(s *sink, err error) {
	defer o.outstanding.Add(-1)
	switch {
	case err == nil:
		s.written.Add(1)
	case errors.Is(err, kgo.ErrMaxBuffered), errors.Is(err, kgo.ErrClientClosed):
		s.dropped.Add(1)
	default:
		s.errors.Add(1)
		s.warn(fmt.Sprintf("delivery failed; check that the brokers in log.kafka.brokers (%s) are reachable and that the topic exists or can be created", o.brokers), err)
	}
}

func (o *kafkaOut) flush(*sink) {}

// close gives buffered records kafkaCloseFlush to be delivered, closes the
// client (which fails the rest) and waits a little for their promises, so
// that the counters are final.
func (o *kafkaOut) close(s *sink) {
	ctx, cancel := context.WithTimeout(context.Background(), kafkaCloseFlush)
	err := o.cl.Flush(ctx)
	cancel()
	if err != nil {
		s.warn(fmt.Sprintf("records not delivered within %s of closing are dropped", kafkaCloseFlush), err)
	}
	o.cl.Close()
	deadline := time.Now().Add(kafkaSettle)
	for o.outstanding.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
