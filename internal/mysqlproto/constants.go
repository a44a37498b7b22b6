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
)

// COM_SET_OPTION values.
const (
	SetOptionMultiStatementsOn  = 0
	SetOptionMultiStatementsOff = 1
)

// CursorTypeReadOnly is the COM_STMT_EXECUTE flag that opens a cursor.
const CursorTypeReadOnly = 0x01
