package mysqlproto

import "time"

var noDeadline time.Time

// Server error codes Vigil sends itself (names as in the MySQL manual).
const (
	ERHandshakeError     = 1043
	ERAccessDeniedError  = 1045
	ERNoDB               = 1046
	ERUnknownComError    = 1047
	ERConCount           = 1040
	EROutOfResources     = 1041
	ERUnknownError       = 1105
	ERNetPacketTooLarge  = 1153
	ERNetReadError       = 1158
	ERQueryInterrupted   = 1317
	ERUnknownStmtHandler = 1243
	ERParseError         = 1064
	ERNotSupportedYet    = 1235
	ERNoSuchThread       = 1094
	ERKillDenied         = 1095
	ERLockWaitTimeout    = 1205
	ERQueryTimeout       = 3024
	ERNotAllowedCommand  = 1148
	ERMalformedPacket    = 1835
)

// SQLSTATE values.
const (
	SSHandshakeError = "08S01"
	SSAccessDenied   = "28000"
	SSNetError       = "08S01"
	SSUnknown        = "HY000"
	SSSyntax         = "42000"
	SSNoDB           = "3D000"
)

// ERNeedReprepare: a prepared statement must be prepared again (the
// server's 1615 after a table changed; Vigil's after a schema moved).
const ERNeedReprepare = 1615

// Vigil's own error codes, 7000–7099, documented in docs/errors.md.
const (
	ERVigilNoWriter          = 7001 // no writable primary
	ERVigilNoReader          = 7002 // no readable server
	ERVigilFailoverHeld      = 7003 // statement held too long during a failover/switchover
	ERVigilBackendLost       = 7004 // server connection lost inside a transaction
	ERVigilBackendConnect    = 7005 // could not connect to a server
	ERVigilPinnedConflict    = 7006 // session pinned to a server that left routing
	ERVigilBlocked           = 7007 // blocked by a rule
	ERVigilStatementTimeout  = 7008 // killed by a rule's timeout
	ERVigilUnsupported       = 7009 // command not supported through Vigil
	ERVigilPoolExhausted     = 7010 // no server connection free within connect_timeout
	ERVigilFenced            = 7011 // server fenced by failover; transaction aborted
	ERVigilShuttingDown      = 7012
	ERVigilMultiStatementOff = 7013
	ERVigilInternal          = 7014 // a bug in Vigil ended the session (recovered panic)
	ERVigilSelfFenced        = 7015 // this instance lost its coordination lease (or has not caught up): writes refused
	ERVigilShardCrossCluster = 7016 // sharded listener: a statement or transaction would need two clusters
	ERVigilShardAmbiguous    = 7017 // sharded listener: a schema exists on two clusters and the map names neither
	ERVigilShardReadOnly     = 7018 // sharded listener: a write to a schema in shard state read_only
	ERVigilShardOffline      = 7019 // sharded listener: a statement on a schema in shard state offline
)

// SQLSTATEs for Vigil's errors: 08xxx says "connection problem, retry".
const (
	SSVigilUnavailable = "08004"
	SSVigilLost        = "08S01"
	SSVigilBlocked     = "42000"
	SSVigilTimeout     = "70100"
	SSVigilUnsupported = "0A000"
	// SSVigilSelfFenced: class 08 (connection exception: retry, through
	// another instance), an implementation-defined subclass of its own.
	SSVigilSelfFenced = "08V01"
	// SSVigilShardReadOnly: "read-only SQL-transaction", as a write in a
	// read-only transaction.
	SSVigilShardReadOnly = "25006"
	// SSVigilShardAmbiguous: syntax or access rule violation, as an
	// ambiguous name.
	SSVigilShardAmbiguous = "42000"
)
