package sqlscan

// Keyword identifies a word of SQL syntax, matched case-insensitively.
// The zero Keyword means "not a keyword". The named constants are the
// keywords that classification looks at; every other keyword in the table
// (reserved words, common statement words, built-in function and type
// names) has an unnamed value whose String is its upper-case spelling.
type Keyword uint16

// Keywords used by classification.
const (
	kwNone Keyword = iota
	KwAlter
	KwAnalyze
	KwAtomic
	KwBackup
	KwBegin
	KwBinlog
	KwCache
	KwCall
	KwCase
	KwChain
	KwChange
	KwCharacter
	KwCharset
	KwCheck
	KwChecksum
	KwClone
	KwClose
	KwCommit
	KwConnection
	KwConnectionID
	KwCount
	KwCreate
	KwCurrent
	KwData
	KwDatabase
	KwDeallocate
	KwDefault
	KwDelete
	KwDesc
	KwDescribe
	KwDiagnostics
	KwDo
	KwDrop
	KwDumpfile
	KwElse
	KwEnd
	KwErrors
	KwEvent
	KwExecute
	KwExplain
	KwExport
	KwExtended
	KwFalse
	KwFlush
	KwFor
	KwFormat
	KwFoundRows
	KwFunction
	KwGet
	KwGetLock
	KwGlobal
	KwGrant
	KwHandler
	KwHard
	KwHelp
	KwID
	KwIf
	KwImport
	KwIn
	KwIndex
	KwInfile
	KwInsert
	KwInstall
	KwInstance
	KwInto
	KwIsFreeLock
	KwIsUsedLock
	KwKill
	KwLastInsertID
	KwLastval
	KwLoad
	KwLocal
	KwLock
	KwLoop
	KwMerge
	KwMode
	KwNames
	KwNext
	KwNextval
	KwNo
	KwNoWriteToBinlog
	KwNot
	KwNull
	KwOff
	KwOn
	KwOnly
	KwOpen
	KwOptimize
	KwOutfile
	KwPackage
	KwPartitions
	KwPassword
	KwPersist
	KwPersistOnly
	KwPrepare
	KwPrevious
	KwProcedure
	KwProcesslist
	KwProfile
	KwProfiles
	KwPurge
	KwQuery
	KwRead
	KwRecover
	KwRelease
	KwReleaseAllLocks
	KwReleaseLock
	KwRename
	KwRepair
	KwRepeat
	KwReplace
	KwReset
	KwResource
	KwRestart
	KwRevoke
	KwRole
	KwRollback
	KwRow
	KwRowCount
	KwSavepoint
	KwSchema
	KwSelect
	KwSession
	KwSet
	KwSetval
	KwShare
	KwShow
	KwShutdown
	KwSoft
	KwSQLCalcFoundRows
	KwStacked
	KwStart
	KwStatement
	KwStatus
	KwStop
	KwTable
	KwTables
	KwTemporary
	KwThen
	KwTo
	KwTransaction
	KwTrigger
	KwTrue
	KwTruncate
	KwUninstall
	KwUnlock
	KwUpdate
	KwUse
	KwUser
	KwValue
	KwValues
	KwView
	KwWhile
	KwWith
	KwWarnings
	KwWork
	KwWrite
	KwXA
	kwNamed // number of named keywords (including kwNone)
)

var namedKeywords = [kwNamed]string{
	KwAlter: "ALTER", KwAnalyze: "ANALYZE", KwAtomic: "ATOMIC", KwBackup: "BACKUP",
	KwBegin: "BEGIN", KwBinlog: "BINLOG", KwCache: "CACHE", KwCall: "CALL", KwCase: "CASE",
	KwChain: "CHAIN", KwChange: "CHANGE", KwCharacter: "CHARACTER", KwCharset: "CHARSET",
	KwCheck: "CHECK", KwChecksum: "CHECKSUM", KwClone: "CLONE", KwClose: "CLOSE", KwCommit: "COMMIT",
	KwConnectionID: "CONNECTION_ID", KwCount: "COUNT", KwErrors: "ERRORS", KwOpen: "OPEN",
	KwProcesslist: "PROCESSLIST", KwProfile: "PROFILE", KwProfiles: "PROFILES", KwStatus: "STATUS", KwWarnings: "WARNINGS",
	KwConnection: "CONNECTION", KwCreate: "CREATE", KwCurrent: "CURRENT", KwData: "DATA",
	KwDatabase: "DATABASE", KwDeallocate: "DEALLOCATE", KwDefault: "DEFAULT",
	KwDelete: "DELETE", KwDesc: "DESC", KwDescribe: "DESCRIBE", KwDiagnostics: "DIAGNOSTICS",
	KwDo: "DO", KwDrop: "DROP", KwDumpfile: "DUMPFILE", KwElse: "ELSE", KwEnd: "END",
	KwEvent: "EVENT", KwExecute: "EXECUTE", KwExplain: "EXPLAIN", KwExport: "EXPORT",
	KwExtended: "EXTENDED", KwFalse: "FALSE", KwFlush: "FLUSH", KwFor: "FOR",
	KwFormat: "FORMAT", KwFoundRows: "FOUND_ROWS", KwFunction: "FUNCTION", KwGet: "GET",
	KwGetLock: "GET_LOCK", KwGlobal: "GLOBAL", KwGrant: "GRANT", KwHandler: "HANDLER",
	KwHard: "HARD", KwHelp: "HELP", KwID: "ID", KwIf: "IF", KwImport: "IMPORT", KwIn: "IN",
	KwIndex: "INDEX", KwInfile: "INFILE", KwInsert: "INSERT", KwInstall: "INSTALL",
	KwInstance: "INSTANCE", KwInto: "INTO", KwIsFreeLock: "IS_FREE_LOCK",
	KwIsUsedLock: "IS_USED_LOCK", KwKill: "KILL", KwLastInsertID: "LAST_INSERT_ID",
	KwLastval: "LASTVAL", KwLoad: "LOAD", KwLocal: "LOCAL", KwLock: "LOCK", KwLoop: "LOOP",
	KwMerge: "MERGE", KwMode: "MODE", KwNames: "NAMES", KwNext: "NEXT", KwNextval: "NEXTVAL",
	KwNo: "NO", KwNoWriteToBinlog: "NO_WRITE_TO_BINLOG", KwNot: "NOT", KwNull: "NULL",
	KwOff: "OFF", KwOn: "ON", KwOnly: "ONLY", KwOptimize: "OPTIMIZE", KwOutfile: "OUTFILE",
	KwPackage: "PACKAGE", KwPartitions: "PARTITIONS", KwPassword: "PASSWORD",
	KwPersist: "PERSIST", KwPersistOnly: "PERSIST_ONLY", KwPrepare: "PREPARE",
	KwPrevious: "PREVIOUS", KwProcedure: "PROCEDURE", KwPurge: "PURGE", KwQuery: "QUERY",
	KwRead: "READ", KwRecover: "RECOVER", KwRelease: "RELEASE",
	KwReleaseAllLocks: "RELEASE_ALL_LOCKS", KwReleaseLock: "RELEASE_LOCK",
	KwRename: "RENAME", KwRepair: "REPAIR", KwRepeat: "REPEAT", KwReplace: "REPLACE",
	KwReset: "RESET", KwResource: "RESOURCE", KwRestart: "RESTART", KwRevoke: "REVOKE",
	KwRole: "ROLE", KwRollback: "ROLLBACK", KwRow: "ROW", KwRowCount: "ROW_COUNT",
	KwSavepoint: "SAVEPOINT", KwSchema: "SCHEMA", KwSelect: "SELECT", KwSession: "SESSION",
	KwSet: "SET", KwSetval: "SETVAL", KwShare: "SHARE", KwShow: "SHOW",
	KwShutdown: "SHUTDOWN", KwSoft: "SOFT", KwSQLCalcFoundRows: "SQL_CALC_FOUND_ROWS",
	KwStacked: "STACKED", KwStart: "START", KwStatement: "STATEMENT", KwStop: "STOP",
	KwTable: "TABLE", KwTables: "TABLES", KwTemporary: "TEMPORARY", KwThen: "THEN",
	KwTo: "TO", KwTransaction: "TRANSACTION", KwTrigger: "TRIGGER", KwTrue: "TRUE",
	KwTruncate: "TRUNCATE", KwUninstall: "UNINSTALL", KwUnlock: "UNLOCK",
	KwUpdate: "UPDATE", KwUse: "USE", KwUser: "USER", KwValue: "VALUE", KwValues: "VALUES",
	KwView: "VIEW", KwWhile: "WHILE", KwWith: "WITH", KwWork: "WORK", KwWrite: "WRITE",
	KwXA: "XA",
}

// otherKeywords are the rest of the keyword table: MySQL 8.0 and MariaDB
// reserved words and the non-reserved words that commonly appear as syntax.
var otherKeywords = [...]string{
	"ACCESSIBLE", "ACTION", "ADD", "AFTER", "AGAINST", "AGGREGATE", "ALGORITHM", "ALL",
	"AND", "ANY", "AS", "ASC", "ASENSITIVE", "AT", "AUTO_INCREMENT", "BEFORE", "BETWEEN",
	"BOOL", "BOOLEAN", "BOTH", "BTREE", "BY", "CASCADE", "CASCADED", "CHANGED", "CLOSE",
	"COLLATE", "COLLATION", "COLUMN", "COLUMNS", "COMMITTED", "COMPACT", "COMPRESSED",
	"CONCURRENT", "CONDITION", "CONSISTENT", "CONSTRAINT", "CONTAINS", "CONTINUE", "CROSS",
	"CUBE", "CURSOR", "DATABASES", "DAY_HOUR", "DAY_MICROSECOND", "DAY_MINUTE",
	"DAY_SECOND", "DECLARE", "DEFINER", "DELAYED", "DETERMINISTIC", "DIRECTORY", "DISABLE",
	"DISCARD", "DISTINCT", "DISTINCTROW", "DIV", "DUAL", "DUPLICATE", "DYNAMIC", "EACH",
	"ELSEIF", "EMPTY", "ENABLE", "ENCLOSED", "ENGINE", "ENGINES", "ERRORS", "ESCAPE",
	"ESCAPED", "EVENTS", "EVERY", "EXCEPT", "EXCHANGE", "EXCLUSIVE", "EXISTS", "EXIT",
	"EXPANSION", "FETCH", "FIELDS", "FILE", "FIRST", "FIXED", "FOLLOWING", "FORCE",
	"FOREIGN", "FOUND", "FROM", "FULL", "FULLTEXT", "GENERATED", "GRANTS", "GROUP",
	"GROUPS", "HASH", "HAVING", "HIGH_PRIORITY", "HOUR_MICROSECOND", "HOUR_MINUTE",
	"HOUR_SECOND", "IDENTIFIED", "IGNORE", "INDEXES", "INNER", "INOUT", "INPLACE",
	"INSENSITIVE", "INTERSECT", "INVISIBLE", "INVOKER", "IS", "ISOLATION", "ITERATE",
	"JOIN", "JSON", "KEY", "KEYS", "KEY_BLOCK_SIZE", "LANGUAGE", "LAST", "LATERAL",
	"LEADING", "LEAVE", "LESS", "LEVEL", "LIKE", "LIMIT", "LINEAR", "LINES", "LIST",
	"LOCKED", "LOGS", "LONG", "LOW_PRIORITY", "MASTER", "MAXVALUE", "MEDIUM",
	"MINUTE_MICROSECOND", "MINUTE_SECOND", "MODIFIES", "MODIFY", "NATIONAL", "NATURAL",
	"NONE", "NOWAIT", "OF", "OFFSET", "OPEN", "OPTION", "OPTIONALLY", "OPTIONS", "OR",
	"ORDER", "OUT", "OUTER", "OVER", "OWNER", "PARSER", "PARTIAL", "PARTITION", "PLUGIN",
	"PLUGINS", "PRECEDING", "PRECISION", "PRESERVE", "PRIMARY", "PRIVILEGES", "PROCESSLIST",
	"PROFILE", "PROFILES", "QUICK", "RANGE", "READS", "READ_WRITE", "RECURSIVE",
	"REDUNDANT", "REFERENCES", "REGEXP", "RELAY", "RELAYLOG", "RELOAD", "REMOVE",
	"REORGANIZE", "REPEATABLE", "REPLICA", "REPLICAS", "REPLICATION", "REQUIRE", "RESIGNAL",
	"RESTRICT", "RESUME", "RETURN", "RETURNING", "RETURNS", "REUSE", "RLIKE", "ROLLUP",
	"ROUTINE", "ROWS", "ROW_FORMAT", "SCHEDULE", "SCHEMAS", "SECOND_MICROSECOND",
	"SECURITY", "SENSITIVE", "SEPARATOR", "SEQUENCE", "SERIAL", "SERIALIZABLE", "SERVER",
	"SIGNAL", "SIGNED", "SIMPLE", "SKIP", "SLAVE", "SLAVES", "SNAPSHOT", "SOME", "SONAME",
	"SOUNDS", "SOURCE", "SPATIAL", "SPECIFIC", "SQL", "SQLEXCEPTION", "SQLSTATE",
	"SQLWARNING", "SQL_BIG_RESULT", "SQL_BUFFER_RESULT", "SQL_CACHE", "SQL_NO_CACHE",
	"SQL_SMALL_RESULT", "SSL", "STARTING", "STARTS", "STORAGE", "STORED", "STRAIGHT_JOIN",
	"SUPER", "SUSPEND", "SYSTEM", "TABLESPACE", "TEMPTABLE", "TERMINATED", "THAN", "TIES",
	"TRAILING", "TRIGGERS", "UNCOMMITTED", "UNDEFINED", "UNDO", "UNION", "UNIQUE",
	"UNKNOWN", "UNSIGNED", "UNTIL", "UPGRADE", "USAGE", "USING", "VARIABLES", "VARYING",
	"VIRTUAL", "VISIBLE", "WAIT", "WARNINGS", "WHEN", "WHERE", "WINDOW", "WITHOUT",
	"WRAPPER", "X509", "XML", "XOR", "YEAR_MONTH", "ZEROFILL",
}

// functionKeywords are built-in functions and types: no space is put
// between them and a following "(" in normalised text. Names not already
// in the table are added to it.
var functionKeywords = [...]string{
	// aggregate and window functions
	"AVG", "BIT_AND", "BIT_OR", "BIT_XOR", "COUNT", "CUME_DIST", "DENSE_RANK",
	"FIRST_VALUE", "GROUPING", "GROUP_CONCAT", "JSON_ARRAYAGG", "JSON_OBJECTAGG", "LAG",
	"LAST_VALUE", "LEAD", "MAX", "MIN", "NTH_VALUE", "NTILE", "PERCENT_RANK", "RANK",
	"ROW_NUMBER", "STD", "STDDEV", "STDDEV_POP", "STDDEV_SAMP", "SUM", "VARIANCE",
	"VAR_POP", "VAR_SAMP",
	// scalar functions
	"ABS", "ACOS", "ADDDATE", "AES_DECRYPT", "AES_ENCRYPT", "ANY_VALUE", "ASCII", "ASIN",
	"ATAN", "ATAN2", "BENCHMARK", "BIN", "BIT_COUNT", "BIT_LENGTH", "CAST", "CEIL",
	"CEILING", "CHARACTER_LENGTH", "CHAR_LENGTH", "COALESCE", "COMPRESS", "CONCAT",
	"CONCAT_WS", "CONNECTION_ID", "CONV", "CONVERT", "CONVERT_TZ", "COS", "COT", "CRC32",
	"CURDATE", "CURRENT_DATE", "CURRENT_ROLE", "CURRENT_TIME", "CURRENT_TIMESTAMP",
	"CURRENT_USER", "CURTIME", "DATABASE", "DATEDIFF", "DATE_ADD", "DATE_FORMAT",
	"DATE_SUB", "DAYNAME", "DAYOFMONTH", "DAYOFWEEK", "DAYOFYEAR", "DEGREES", "ELT",
	"EXTRACT", "FIND_IN_SET", "FLOOR", "FOUND_ROWS", "FROM_BASE64", "FROM_DAYS",
	"FROM_UNIXTIME", "GET_FORMAT", "GET_LOCK", "GREATEST", "HEX", "IF", "IFNULL",
	"INET6_ATON", "INET6_NTOA", "INET_ATON", "INET_NTOA", "INSTR", "INTERVAL",
	"IS_FREE_LOCK", "IS_USED_LOCK", "ISNULL", "JSON_ARRAY", "JSON_CONTAINS",
	"JSON_CONTAINS_PATH", "JSON_EXTRACT", "JSON_INSERT", "JSON_KEYS", "JSON_LENGTH",
	"JSON_MERGE_PATCH", "JSON_MERGE_PRESERVE", "JSON_OBJECT", "JSON_OVERLAPS",
	"JSON_QUOTE", "JSON_REMOVE", "JSON_REPLACE", "JSON_SEARCH", "JSON_SET", "JSON_TABLE",
	"JSON_TYPE", "JSON_UNQUOTE", "JSON_VALID", "JSON_VALUE", "LASTVAL", "LAST_DAY",
	"LAST_INSERT_ID", "LCASE", "LEAST", "LEFT", "LENGTH", "LOCALTIME", "LOCALTIMESTAMP",
	"LOCATE", "LOG10", "LOG2", "LOWER", "LPAD", "LTRIM", "MAKEDATE", "MAKETIME", "MAKE_SET",
	"MATCH", "MD5", "MOD", "MONTHNAME", "NEXTVAL", "NOW", "NULLIF", "OCT",
	"OCTET_LENGTH", "ORD", "PERIOD_ADD", "PERIOD_DIFF", "POW", "POWER", "RADIANS", "RAND",
	"REGEXP_INSTR", "REGEXP_LIKE", "REGEXP_REPLACE", "REGEXP_SUBSTR", "RELEASE_ALL_LOCKS",
	"RELEASE_LOCK", "REPEAT", "REPLACE", "REVERSE", "RIGHT", "ROUND", "ROW", "ROW_COUNT",
	"RPAD", "RTRIM", "SCHEMA", "SEC_TO_TIME", "SESSION_USER", "SETVAL", "SHA1", "SHA2",
	"SIN", "SLEEP", "SOUNDEX", "SQRT", "STRCMP", "STR_TO_DATE", "SUBDATE", "SUBSTR",
	"SUBSTRING", "SUBSTRING_INDEX", "SYSDATE", "SYSTEM_USER", "TAN", "TIMEDIFF",
	"TIMESTAMPADD", "TIMESTAMPDIFF", "TIME_FORMAT", "TIME_TO_SEC", "TO_BASE64", "TO_DAYS",
	"TO_SECONDS", "TRIM", "TRUNCATE", "UCASE", "UNCOMPRESS", "UNHEX", "UNIX_TIMESTAMP",
	"UPPER", "USER", "UTC_DATE", "UTC_TIME", "UTC_TIMESTAMP", "UUID", "UUID_SHORT",
	"VERSION", "WEEKDAY", "WEEKOFYEAR", "YEARWEEK",
	// functions that are also date/time units and types
	"DATE", "DAY", "HOUR", "MICROSECOND", "MINUTE", "MONTH", "QUARTER", "SECOND", "TIME",
	"TIMESTAMP", "WEEK", "YEAR",
	// data types
	"BIGINT", "BINARY", "BIT", "BLOB", "CHAR", "DATETIME", "DEC", "DECIMAL", "DOUBLE",
	"ENUM", "FLOAT", "FLOAT4", "FLOAT8", "INT", "INT1", "INT2", "INT3", "INT4", "INT8",
	"INTEGER", "LONGBLOB", "LONGTEXT", "MEDIUMBLOB", "MEDIUMINT", "MEDIUMTEXT", "MIDDLEINT",
	"NCHAR", "NUMERIC", "NVARCHAR", "REAL", "SMALLINT", "TINYBLOB", "TINYINT", "TINYTEXT",
	"VARBINARY", "VARCHAR", "VARCHARACTER",
}

// valueKeywords stand for a value: a sign after them is binary.
var valueKeywords = [...]string{
	"NULL", "TRUE", "FALSE", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP",
	"LOCALTIME", "LOCALTIMESTAMP", "UTC_DATE", "UTC_TIME", "UTC_TIMESTAMP", "CURRENT_USER",
	"CURRENT_ROLE",
}

// identKeywords are keywords that are far more often column names than
// syntax. Normalisation keeps them as written (like identifiers) and drops
// backquotes around them; a sign after them is binary.
var identKeywords = [...]string{
	"COMMENT", "CONNECTION", "DATA", "EVENT", "EXPORT", "HARD", "ID", "INSTANCE", "MODE",
	"OFF", "PASSWORD", "QUERY", "ROLE", "SOFT", "STAGE", "STATUS", "TEXT", "VALUE",
}

// Keyword attributes.
const (
	attrFunc  uint8 = 1 << iota // built-in function or type: no space before "("
	attrValue                   // stands for a value
	attrIdent                   // normalised like an identifier
)

const (
	maxKeywordLen = 24
	kwTableBits   = 12
	kwTableSize   = 1 << kwTableBits
)

type keywordTable struct {
	names []string // by Keyword
	attrs []uint8  // by Keyword
	slots [kwTableSize]Keyword
}

// keywords is built once and never modified.
var keywords = buildKeywords()

func buildKeywords() *keywordTable {
	t := &keywordTable{}
	t.names = append(t.names, namedKeywords[:]...)
	t.attrs = make([]uint8, len(t.names))
	for k := Keyword(1); k < kwNamed; k++ {
		t.insert(k)
	}
	add := func(name string) Keyword {
		if k := t.lookup([]byte(name)); k != kwNone {
			return k
		}
		k := Keyword(len(t.names))
		t.names = append(t.names, name)
		t.attrs = append(t.attrs, 0)
		t.insert(k)
		return k
	}
	for _, name := range otherKeywords {
		add(name)
	}
	for _, name := range functionKeywords {
		t.attrs[add(name)] |= attrFunc
	}
	for _, name := range valueKeywords {
		t.attrs[add(name)] |= attrValue
	}
	for _, name := range identKeywords {
		t.attrs[add(name)] |= attrIdent
	}
	return t
}

func kwHash(h uint32) uint32 { return (h * 2654435761) >> (32 - kwTableBits) }

func (t *keywordTable) insert(k Keyword) {
	name := t.names[k]
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h*31 + uint32(name[i])
	}
	for i := kwHash(h); ; i = (i + 1) & (kwTableSize - 1) {
		if t.slots[i] == kwNone {
			t.slots[i] = k
			return
		}
	}
}

func (t *keywordTable) lookup(w []byte) Keyword {
	if len(w) < 2 || len(w) > maxKeywordLen {
		return kwNone
	}
	var h uint32
	for _, c := range w {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		h = h*31 + uint32(c)
	}
	for i := kwHash(h); ; i = (i + 1) & (kwTableSize - 1) {
		k := t.slots[i]
		if k == kwNone {
			return kwNone
		}
		if upperEqual(w, t.names[k]) {
			return k
		}
	}
}

// upperEqual reports whether w equals the upper-case name, ignoring ASCII
// case.
func upperEqual(w []byte, name string) bool {
	if len(w) != len(name) {
		return false
	}
	for i, c := range w {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// LookupKeyword returns the keyword that w spells, case-insensitively, or 0.
func LookupKeyword(w []byte) Keyword { return keywords.lookup(w) }

// String returns the keyword in upper case, or "" for 0.
func (k Keyword) String() string {
	if int(k) < len(keywords.names) {
		return keywords.names[k]
	}
	return ""
}

func (k Keyword) attr() uint8 {
	if int(k) < len(keywords.attrs) {
		return keywords.attrs[k]
	}
	return 0
}

// IsFunction reports whether k is a built-in function or type name.
func (k Keyword) IsFunction() bool { return k.attr()&attrFunc != 0 }
