// Package qcache is the query result cache: complete replies (the wire
// frames a server sent for one read-only statement) kept for the time a
// rule's cache_ttl gives, bounded in bytes, least recently used evicted
// first. The caller builds the key from everything that changes a
// statement's result (cluster, user, schema, session variables, protocol
// flavour and the statement text) and never looks the cache up inside a
// transaction.
package qcache

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

type entry struct {
	key     string
	frames  []byte
	expires time.Time
	elem    *list.Element
}

// Cache is safe for concurrent use.
type Cache struct {
	mu       sync.Mutex
	m        map[string]*entry
	lru      list.List // front: most recently used
	bytes    int64
	maxBytes atomic.Int64
	maxEntry atomic.Int64

	hits, misses, stores, evictions, expired, tooBig atomic.Uint64
}

// New makes a cache of at most maxBytes, refusing replies over maxEntry.
func New(maxBytes, maxEntry int64) *Cache {
	c := &Cache{m: map[string]*entry{}}
	c.SetLimits(maxBytes, maxEntry)
	return c
}

// SetLimits changes the bounds (hot reload).
func (c *Cache) SetLimits(maxBytes, maxEntry int64) {
	c.maxBytes.Store(maxBytes)
	c.maxEntry.Store(maxEntry)
	c.mu.Lock()
	c.shrinkLocked()
	c.mu.Unlock()
}

// overhead approximates the bookkeeping bytes of one entry.
const overhead = 128

func (e *entry) size() int64 { return int64(len(e.key)+len(e.frames)) + overhead }

// Get returns the cached reply for key, or nil. The returned slice must
// not be modified.
func (c *Cache) Get(key []byte, now time.Time) []byte {
	c.mu.Lock()
	e := c.m[string(key)] // no allocation: the compiler converts in place
	if e == nil {
		c.mu.Unlock()
		c.misses.Add(1)
		return nil
	}
	if now.After(e.expires) {
		c.removeLocked(e)
		c.mu.Unlock()
		c.expired.Add(1)
		c.misses.Add(1)
		return nil
	}
	c.lru.MoveToFront(e.elem)
	f := e.frames
	c.mu.Unlock()
	c.hits.Add(1)
	return f
}

// Put stores a reply; frames is copied. It reports whether it was stored.
func (c *Cache) Put(key, frames []byte, ttl time.Duration, now time.Time) bool {
	e := &entry{key: string(key), frames: append([]byte(nil), frames...), expires: now.Add(ttl)}
	if e.size() > c.maxEntry.Load() || e.size() > c.maxBytes.Load() {
		c.tooBig.Add(1)
		return false
	}
	c.mu.Lock()
	if old := c.m[e.key]; old != nil {
		c.removeLocked(old)
	}
	e.elem = c.lru.PushFront(e)
	c.m[e.key] = e
	c.bytes += e.size()
	c.shrinkLocked()
	c.mu.Unlock()
	c.stores.Add(1)
	return true
}

func (c *Cache) removeLocked(e *entry) {
	c.lru.Remove(e.elem)
	delete(c.m, e.key)
	c.bytes -= e.size()
}

func (c *Cache) shrinkLocked() {
	for c.bytes > c.maxBytes.Load() {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.removeLocked(back.Value.(*entry))
		c.evictions.Add(1)
	}
}

// MaxEntry is the largest reply the cache keeps, in bytes.
func (c *Cache) MaxEntry() int64 { return c.maxEntry.Load() }

// Purge empties the cache.
func (c *Cache) Purge() {
	c.mu.Lock()
	clear(c.m)
	c.lru.Init()
	c.bytes = 0
	c.mu.Unlock()
}

// Stats are the cache's counters.
type Stats struct {
	Entries   int    `json:"entries"`
	Bytes     int64  `json:"bytes"`
	MaxBytes  int64  `json:"max_bytes"`
	Hits      uint64 `json:"hits"`
	Misses    uint64 `json:"misses"`
	Stores    uint64 `json:"stores"`
	Evictions uint64 `json:"evictions"`
	Expired   uint64 `json:"expired"`
	TooBig    uint64 `json:"too_big"`
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	n, b := len(c.m), c.bytes
	c.mu.Unlock()
	return Stats{Entries: n, Bytes: b, MaxBytes: c.maxBytes.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(),
		Stores: c.stores.Load(), Evictions: c.evictions.Load(), Expired: c.expired.Load(), TooBig: c.tooBig.Load()}
}
