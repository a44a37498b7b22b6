package qlog

import "time"

// Kind says what an [Entry] records.
type Kind uint8

const (
	// KindQuery is a statement a client sent.
	KindQuery Kind = iota
	// KindAuth is a client authentication attempt.
	KindAuth
)

// String returns the name written in the "type" field.
func (k Kind) String() string {
	switch k {
	case KindQuery:
		return "query"
	case KindAuth:
		return "auth"
	}
	return "unknown"
}

// Entry is one record. Log copies what it needs: the caller may reuse
// Statement's memory after Log returns.
type Entry struct {
	Time      time.Time // zero: the time Log is called
	Kind      Kind
	Session   uint32
	Cluster   string
	User      string
	Client    string // client address host:port
	Schema    string
	Digest    uint64 // 64-bit statement digest (0 = none)
	Statement []byte // raw statement text as the client sent it
	Server    string // server name that ran it ("" if none, e.g. blocked or cached)
	Duration  time.Duration
	Rows      int64  // rows sent or affected
	ErrCode   uint16 // 0 = success
	Message   string // error message (auth failures, blocked statements), optional
	Rule      string // name of the rule that matched, optional
	Cached    bool   // served from the query cache
	Refused   bool   // Vigil answered with its own error and no server had the statement ("refused_by":"vigil")
	Success   bool   // for KindAuth
}
