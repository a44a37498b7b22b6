package sqlscan

import "strings"

// Class is what a statement does, for routing.
type Class uint8

// Statement classes. See the package documentation for the rules.
const (
	ClassUnknown       Class = iota // not understood: route to the writer
	ClassRead                       // SELECT, SHOW, DESCRIBE/EXPLAIN, WITH ... SELECT, (SELECT ...), VALUES, TABLE, HELP, XA RECOVER
	ClassWrite                      // DML, DDL, GRANT/REVOKE, CALL, DO, HANDLER, admin statements, FLUSH, compound statements
	ClassBegin                      // BEGIN [WORK], START TRANSACTION [READ WRITE | WITH CONSISTENT SNAPSHOT], XA START/BEGIN
	ClassBeginReadOnly              // START TRANSACTION READ ONLY: may run on a reader
	ClassCommit                     // COMMIT, XA COMMIT
	ClassRollback                   // ROLLBACK (not ROLLBACK TO), XA ROLLBACK
	ClassSavepoint                  // SAVEPOINT x, ROLLBACK [WORK] TO [SAVEPOINT] x, RELEASE SAVEPOINT x
	ClassSet                        // SET of session, global and user variables, NAMES, CHARACTER SET, TRANSACTION
	ClassUse                        // USE db
	ClassSession                    // other session statements: LOCK/UNLOCK TABLES, PREPARE/EXECUTE/DEALLOCATE, KILL, XA END/PREPARE, ...
)

var classNames = [...]string{
	ClassUnknown:       "unknown",
	ClassRead:          "read",
	ClassWrite:         "write",
	ClassBegin:         "begin",
	ClassBeginReadOnly: "begin-read-only",
	ClassCommit:        "commit",
	ClassRollback:      "rollback",
	ClassSavepoint:     "savepoint",
	ClassSet:           "set",
	ClassUse:           "use",
	ClassSession:       "session",
}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class?"
}

// Flags are facts about a statement that change routing or pin the session.
type Flags uint64

// Statement flags. For a multi-statement text they are the union over all
// statements (see the package documentation).
const (
	FlagMulti          Flags = 1 << iota // more than one statement
	FlagForUpdate                        // FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE
	FlagSideEffect                       // has side effects or must see the primary (see the package documentation)
	FlagGetLock                          // GET_LOCK(: pins the session
	FlagReleaseLock                      // RELEASE_LOCK( or RELEASE_ALL_LOCKS(
	FlagCalcFoundRows                    // SQL_CALC_FOUND_ROWS
	FlagFoundRows                        // FOUND_ROWS()
	FlagTempTable                        // CREATE TEMPORARY TABLE (or SEQUENCE)
	FlagDropTemp                         // DROP TEMPORARY TABLE
	FlagLockTables                       // LOCK TABLE(S), LOCK INSTANCE FOR BACKUP, FLUSH TABLES ... WITH READ LOCK / FOR EXPORT, BACKUP LOCK
	FlagUnlockTables                     // UNLOCK TABLE(S), UNLOCK INSTANCE, BACKUP UNLOCK
	FlagPrepare                          // text-protocol PREPARE x FROM ...
	FlagDeallocate                       // DEALLOCATE PREPARE, DROP PREPARE
	FlagUserVar                          // assigns a user variable: SET @x=, @x :=, INTO @x
	FlagAutocommitOff                    // SET [SESSION] autocommit = 0|OFF|FALSE
	FlagAutocommitOn                     // SET [SESSION] autocommit = 1|ON|TRUE
	FlagSqlLogBinOff                     // SET [SESSION] sql_log_bin = 0|OFF|FALSE
	FlagXA                               // XA ...
	FlagKill                             // KILL ...
	FlagReadOnlyTrx                      // START TRANSACTION READ ONLY
	FlagExplainAnalyze                   // ANALYZE <stmt>, EXPLAIN ANALYZE: runs the statement
	FlagGlobalSet                        // SET GLOBAL / PERSIST / PERSIST_ONLY, SET @@global.x
	FlagLoadLocal                        // LOAD DATA LOCAL INFILE, LOAD XML LOCAL INFILE
	FlagChain                            // COMMIT/ROLLBACK AND CHAIN: a new transaction starts at once
	FlagRelease                          // COMMIT/ROLLBACK RELEASE: the server closes the connection
	// FlagDiagnostics: reads the diagnostics area the previous statement
	// left on its server connection: SHOW WARNINGS|ERRORS, SHOW COUNT(*)
	// WARNINGS|ERRORS, GET [CURRENT|STACKED] DIAGNOSTICS, @@warning_count,
	// @@error_count.
	FlagDiagnostics
	FlagLastInsertID // LAST_INSERT_ID(, @@identity, @@last_insert_id, @@insert_id
	FlagRowCount     // ROW_COUNT(
	// FlagSessionStatus: reads or resets state of one server connection
	// that cannot be replayed: SHOW [SESSION] STATUS, SHOW PROFILE(S),
	// information_schema.SESSION_STATUS / SESSION_VARIABLES, FLUSH STATUS,
	// SET profiling.
	FlagSessionStatus
	FlagSequence // NEXTVAL(, NEXT VALUE FOR: LASTVAL( now reads this connection's value
	FlagRole     // SET ROLE: the connection's privileges change
	FlagHandler  // HANDLER ... OPEN: a table handler lives on the connection
	// FlagConnectionID: CONNECTION_ID(): a proxy answers with the id it
	// gave the client.
	FlagConnectionID
	// FlagSessionTrack: SET [SESSION] session_track_system_variables,
	// session_track_schema, session_track_state_change or
	// session_track_gtids: the client changes what it is told; in another
	// statement, a read of one of them.
	FlagSessionTrack
	// FlagCall: CALL. A stored procedure may leave session state that no
	// reply reports (temporary tables, user variables, SET @@x, locks):
	// MariaDB's state-change tracker flags every CALL alike.
	FlagCall
)

var flagNames = [...]string{
	"multi", "for-update", "side-effect", "get-lock", "release-lock", "calc-found-rows",
	"found-rows", "temp-table", "drop-temp", "lock-tables", "unlock-tables", "prepare",
	"deallocate", "user-var", "autocommit-off", "autocommit-on", "sql-log-bin-off", "xa",
	"kill", "read-only-trx", "explain-analyze", "global-set", "load-local", "chain",
	"release", "diagnostics", "last-insert-id", "row-count", "session-status", "sequence",
	"role", "handler", "connection-id", "session-track", "call",
}

// Has reports whether all of g are set in f.
func (f Flags) Has(g Flags) bool { return f&g == g }

// String lists the flags joined by "|", or "0".
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(name)
		}
	}
	if rest := f &^ (1<<len(flagNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("unknown")
	}
	return b.String()
}

// Info is the result of one [Scan].
type Info struct {
	Class Class
	Flags Flags
	// Digest is the 64-bit digest of the normalised text (see [Normalize]
	// and [DigestText]); it is 0 only if the statement is empty (nothing
	// but whitespace, comments and semicolons).
	Digest uint64
	// First is the first keyword of the text after leading whitespace,
	// comments and parentheses, or 0 if it does not start with one
	// (useful as a metrics label: First.String()).
	First Keyword
	// Facts are what the frontend asks of the text besides Flags.
	Facts Facts
	sets  setSites   // for QualifySessionSets
	kill  killTarget // for KillTarget
}
