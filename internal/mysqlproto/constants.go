package mysqlproto

// Command bytes (first byte of a client command packet).
const (
	ComQuit             = 0x01
	ComInitDB           = 0x02
	ComQuery            = 0x03
	ComFieldList        = 0x04
	ComCreateDB         = 0x05
	ComDropDB           = 0x06
	ComRefresh          = 0x07
	ComShutdown         = 0x08
	ComStatistics       = 0x09
	ComProcessInfo      = 0x0a
	ComConnect          = 0x0b
	ComProcessKill      = 0x0c
	ComDebug            = 0x0d
	ComPing             = 0x0e
	ComTime             = 0x0f
	ComDelayedInsert    = 0x10
	ComChangeUser       = 0x11
	ComBinlogDump       = 0x12
	ComTableDump        = 0x13
	ComConnectOut       = 0x14
	ComRegisterSlave    = 0x15
	ComStmtPrepare      = 0x16
	ComStmtExecute      = 0x17
	ComStmtSendLongData = 0x18
	ComStmtClose        = 0x19
	ComStmtReset        = 0x1a
	ComSetOption        = 0x1b
	ComStmtFetch        = 0x1c
	ComDaemon           = 0x1d
	ComBinlogDumpGTID   = 0x1e
	ComResetConnection  = 0x1f
)

// Capability flags.
const (
	CapabilityClientLongPassword               uint32 = 1 << 0 // CLIENT_MYSQL on MariaDB
	CapabilityClientFoundRows                  uint32 = 1 << 1
	CapabilityClientLongFlag                   uint32 = 1 << 2
	CapabilityClientConnectWithDB              uint32 = 1 << 3
	CapabilityClientNoSchema                   uint32 = 1 << 4
	CapabilityClientCompress                   uint32 = 1 << 5
	CapabilityClientODBC                       uint32 = 1 << 6
	CapabilityClientLocalFiles                 uint32 = 1 << 7
	CapabilityClientIgnoreSpace                uint32 = 1 << 8
	CapabilityClientProtocol41                 uint32 = 1 << 9
	CapabilityClientInteractive                uint32 = 1 << 10
	CapabilityClientSSL                        uint32 = 1 << 11
	CapabilityClientIgnoreSigpipe              uint32 = 1 << 12
	CapabilityClientTransactions               uint32 = 1 << 13
	CapabilityClientReserved                   uint32 = 1 << 14
	CapabilityClientSecureConnection           uint32 = 1 << 15
	CapabilityClientMultiStatements            uint32 = 1 << 16
	CapabilityClientMultiResults               uint32 = 1 << 17
	CapabilityClientPSMultiResults             uint32 = 1 << 18
	CapabilityClientPluginAuth                 uint32 = 1 << 19
	CapabilityClientConnectAttrs               uint32 = 1 << 20
	CapabilityClientPluginAuthLenencClientData uint32 = 1 << 21
	CapabilityClientCanHandleExpiredPasswords  uint32 = 1 << 22
	CapabilityClientSessionTrack               uint32 = 1 << 23
	CapabilityClientDeprecateEOF               uint32 = 1 << 24
)

// ServerCapabilities is what Vigil offers clients (and asks of servers,
// minus SSL unless configured).
const ServerCapabilities = CapabilityClientLongPassword | CapabilityClientFoundRows |
	CapabilityClientLongFlag | CapabilityClientConnectWithDB | CapabilityClientODBC |
	CapabilityClientLocalFiles | CapabilityClientIgnoreSpace | CapabilityClientProtocol41 |
	CapabilityClientInteractive | CapabilityClientIgnoreSigpipe | CapabilityClientTransactions |
	CapabilityClientSecureConnection | CapabilityClientMultiStatements | CapabilityClientMultiResults |
	CapabilityClientPSMultiResults | CapabilityClientPluginAuth | CapabilityClientConnectAttrs |
	CapabilityClientPluginAuthLenencClientData | CapabilityClientSessionTrack | CapabilityClientDeprecateEOF

// FlavourCapabilities are the client capabilities that change what a server
// sends or how it behaves on a connection; a backend connection serves a
// client only if these match.
const FlavourCapabilities = CapabilityClientFoundRows | CapabilityClientIgnoreSpace |
	CapabilityClientDeprecateEOF | CapabilityClientInteractive

// MariaDB's extended capabilities. MariaDB keeps them in the high 32 bits
// of a 64-bit capability word (MARIADB_CLIENT_EXTENDED_METADATA is 1<<35);
// on the wire they travel in the last 4 bytes of the greeting's 10-byte
// filler and of the handshake response's 23-byte filler, and only when
// CLIENT_MYSQL (bit 0, CapabilityClientLongPassword) is clear: a server
// that sets it is MySQL (or a MariaDB before 10.2), a client that sets it
// does not speak MariaDB's extensions.
const (
	MariaDBClientProgress           uint32 = 1 << 0 // progress reports: 0xff packets with error code 0xffff
	MariaDBClientComMulti           uint32 = 1 << 1 // COM_MULTI (never released)
	MariaDBClientStmtBulkOperations uint32 = 1 << 2 // COM_STMT_BULK_EXECUTE
	MariaDBClientExtendedMetadata   uint32 = 1 << 3 // extended type info (json, uuid, inet4, geometry types) in column definitions
	MariaDBClientCacheMetadata      uint32 = 1 << 4 // COM_STMT_EXECUTE replies may omit the column definitions
)

// MariaDBCapabilities are the extended capabilities Vigil can offer clients
// (when every server offers them too). Only extended metadata: it adds
// data inside column definitions, which Vigil forwards without decoding.
// Progress packets would look like errors to the forwarder; cached
// metadata changes the shape of the COM_STMT_EXECUTE replies the forwarder
// walks, and a statement prepared again on another server connection
// would need the metadata the client cached; bulk operations need
// COM_STMT_BULK_EXECUTE, which Vigil does not route.
const MariaDBCapabilities = MariaDBClientExtendedMetadata

// FlavourMariaDBCapabilities are the extended capabilities that change
// what a server sends: part of a connection's flavour.
const FlavourMariaDBCapabilities = MariaDBClientExtendedMetadata

// Flavour combines the flavour bits of a client's capabilities and of its
// MariaDB extended capabilities into one word, as MariaDB lays them out:
// capabilities in the low 32 bits, extended ones in the high 32 bits. A
// server connection serves a client only if their flavours are equal.
func Flavour(caps, mariadbCaps uint32) uint64 {
	return uint64(caps&FlavourCapabilities) | uint64(mariadbCaps&FlavourMariaDBCapabilities)<<32
}

// FlavourAfterChangeUser is the flavour of a session after
// COM_CHANGE_USER, successful or not. MariaDB applies CLIENT_IGNORE_SPACE
// (IGNORE_SPACE in sql_mode) and CLIENT_INTERACTIVE (wait_timeout =
// interactive_timeout) to the session variables at login only; the reset
// of COM_CHANGE_USER brings them back to their global values, so the
// session goes on as if the client had not asked for either.
func FlavourAfterChangeUser(f uint64) uint64 {
	return f &^ uint64(CapabilityClientIgnoreSpace|CapabilityClientInteractive)
}

// SplitFlavour returns the capability and extended capability bits of a
// flavour.
func SplitFlavour(f uint64) (caps, mariadbCaps uint32) {
	return uint32(f) & FlavourCapabilities, uint32(f>>32) & FlavourMariaDBCapabilities
}

// Server status flags.
const (
	ServerStatusInTrans            uint16 = 0x0001
	ServerStatusAutocommit         uint16 = 0x0002
	ServerMoreResultsExists        uint16 = 0x0008
	ServerStatusNoGoodIndexUsed    uint16 = 0x0010
	ServerStatusNoIndexUsed        uint16 = 0x0020
	ServerStatusCursorExists       uint16 = 0x0040
	ServerStatusLastRowSent        uint16 = 0x0080
	ServerStatusDBDropped          uint16 = 0x0100
	ServerStatusNoBackslashEscapes uint16 = 0x0200
	ServerStatusMetadataChanged    uint16 = 0x0400
	ServerQueryWasSlow             uint16 = 0x0800
	ServerPSOutParams              uint16 = 0x1000
	ServerStatusInTransReadonly    uint16 = 0x2000
	ServerSessionStateChanged      uint16 = 0x4000
)

// Session state change types in an OK packet.
const (
	SessionTrackSystemVariables            = 0x00
	SessionTrackSchema                     = 0x01
	SessionTrackStateChange                = 0x02
	SessionTrackGTIDs                      = 0x03
	SessionTrackTransactionCharacteristics = 0x04
	SessionTrackTransactionState           = 0x05
)

// Packet header bytes.
const (
	OKPacket          = 0x00
	LocalInfilePacket = 0xfb
	EOFPacket         = 0xfe
	ErrPacket         = 0xff
	AuthMoreData      = 0x01
	AuthSwitchRequest = 0xfe
)

// Authentication plugin names.
const (
	AuthNativePassword     = "mysql_native_password"
	AuthCachingSha2        = "caching_sha2_password"
	AuthClearPassword      = "mysql_clear_password"
	AuthSha256Password     = "sha256_password"
	cachingSha2FastAuthOK  = 3
	cachingSha2FullAuth    = 4
	cachingSha2RequestKey  = 2
	DefaultCollationID     = 45 // utf8mb4_general_ci
	DefaultMaxAllowedBytes = 64 << 20
	// MaxHandshakePacket bounds every packet a client sends before it is
	// authenticated (handshake response, auth switch and full-auth
	// answers): real clients send well under 2 KiB, connection attributes
	// included.
	MaxHandshakePacket = 16 << 10
)

// COM_SET_OPTION values.
const (
	SetOptionMultiStatementsOn  = 0
	SetOptionMultiStatementsOff = 1
)

// CursorTypeReadOnly is the COM_STMT_EXECUTE flag that opens a cursor.
const CursorTypeReadOnly = 0x01
