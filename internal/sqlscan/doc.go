// Package sqlscan lexes, classifies and digests the SQL text of client
// statements (COM_QUERY) for routing.
//
// It owns the one pass that every statement makes through the proxy:
// [Scan] lexes the text once and returns the statement's [Class], its
// [Flags], a 64-bit digest of its normalised text, its first keyword and
// the [Facts] the frontend's session emulation asks (with where a SET
// needs @@SESSION., see [Info.QualifySessionSets], and a KILL's target,
// see [Info.KillTarget]), without allocating: nothing downstream lexes
// the text again to learn about it. [ScanRefs] is Scan that also
// collects the schema names the text names (see Schema names).
// [Normalize] returns the normalised text itself (for rules and
// statistics), and [Mask] the same text with nothing that could be a
// secret (for the query log); [Lexer] is exported so that other packages
// can build on the same tokens. Everything is a
// pure function of its input: no I/O, no state between calls, safe for
// concurrent use.
//
// Lexing assumes the default sql_mode: backslash escapes in strings (not
// NO_BACKSLASH_ESCAPES) and "..." as a string (not ANSI_QUOTES). Comments
// are "-- " (a double dash followed by whitespace or the end), "#" and
// "/* */"; optimizer hints "/*+ */" are comments. Executable comments
// ("/*! */", "/*!50001 */", "/*M! */", "/*M!100101 */") are lexed as code,
// whatever the version, because a server runs them. Unterminated strings
// and comments run to the end of the text.
//
// # Classification
//
// Leading whitespace, comments and opening parentheses are skipped and the
// statement is classified by its first keywords:
//
//   - ClassRead: SELECT, SHOW (anything; the router decides what must see
//     the primary), DESCRIBE/DESC/EXPLAIN of any statement (EXPLAIN does
//     not run it), TABLE, VALUES, HELP, XA RECOVER; WITH ... is classified
//     by the statement after the CTE list (WITH ... SELECT is a read,
//     WITH ... UPDATE/DELETE a write). ANALYZE <stmt> and EXPLAIN ANALYZE
//     run the statement: they are reads only if the statement is one, and
//     set FlagExplainAnalyze.
//   - ClassWrite: INSERT, UPDATE, DELETE, REPLACE, MERGE, LOAD, CREATE,
//     ALTER, DROP, TRUNCATE, RENAME, GRANT, REVOKE, CALL, DO, HANDLER,
//     OPTIMIZE/ANALYZE/REPAIR/CHECK/CHECKSUM TABLE, FLUSH, RESET, PURGE,
//     INSTALL/UNINSTALL, CHANGE MASTER, START/STOP SLAVE|REPLICA, IMPORT,
//     CACHE INDEX, BINLOG, CLONE, SET PASSWORD/ROLE/DEFAULT ROLE, and
//     MariaDB compound statements (BEGIN NOT ATOMIC ... END, IF, CASE,
//     LOOP, REPEAT, WHILE).
//   - ClassBegin: BEGIN [WORK], START TRANSACTION [READ WRITE | WITH
//     CONSISTENT SNAPSHOT], XA START/BEGIN. ClassBeginReadOnly: START
//     TRANSACTION ... READ ONLY (with FlagReadOnlyTrx).
//   - ClassCommit: COMMIT, XA COMMIT. ClassRollback: ROLLBACK, XA ROLLBACK.
//     AND CHAIN sets FlagChain and RELEASE sets FlagRelease.
//   - ClassSavepoint: SAVEPOINT x, ROLLBACK [WORK] TO [SAVEPOINT] x,
//     RELEASE SAVEPOINT x.
//   - ClassSet: every other SET — system variables (SESSION, LOCAL, GLOBAL,
//     PERSIST, @@x, @@session.x, @@global.x), user variables, NAMES,
//     CHARACTER SET, [SESSION|GLOBAL] TRANSACTION. MariaDB's SET STATEMENT
//     ... FOR <stmt> is classified by <stmt>.
//   - ClassUse: USE db.
//   - ClassSession: LOCK/UNLOCK TABLES and INSTANCE, MariaDB BACKUP,
//     PREPARE, EXECUTE, DEALLOCATE/DROP PREPARE, KILL, XA END, XA PREPARE,
//     GET DIAGNOSTICS, SHUTDOWN, RESTART.
//   - ClassUnknown: anything else, including an empty statement. Route it
//     to the writer.
//
// Flags record facts that change routing or pin the session:
//
//   - FlagForUpdate: FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE.
//   - FlagSideEffect: the statement changes session state or must see the
//     primary: GET_LOCK(, RELEASE_LOCK(, RELEASE_ALL_LOCKS(, IS_FREE_LOCK(,
//     IS_USED_LOCK(, LAST_INSERT_ID(, @@identity, @@last_insert_id,
//     FOUND_ROWS(, ROW_COUNT(, NEXTVAL(, SETVAL(, LASTVAL(, NEXT/PREVIOUS
//     VALUE FOR, @x := ..., INTO @x, INTO OUTFILE/DUMPFILE, and in a read
//     the call of a function MariaDB does not know as built-in (a stored
//     function may write: builtins.go), quoted or qualified calls
//     included; a CTE's column list (WITH [RECURSIVE] name (...)) is not a
//     call. SLEEP( is not flagged. It is cleared on SET statements, which
//     are routed as SETs.
//   - FlagGetLock, FlagReleaseLock, FlagCalcFoundRows (SQL_CALC_FOUND_ROWS),
//     FlagFoundRows (FOUND_ROWS(), FlagUserVar (SET @x =, @x :=, INTO @x,
//     GET DIAGNOSTICS @x = ...).
//   - Statements that read what one server connection keeps for its
//     session: FlagDiagnostics (SHOW WARNINGS | ERRORS, SHOW COUNT(*)
//     WARNINGS | ERRORS, GET [CURRENT | STACKED] DIAGNOSTICS,
//     @@warning_count, @@error_count), FlagLastInsertID (LAST_INSERT_ID(,
//     @@identity, @@last_insert_id), FlagRowCount (ROW_COUNT(),
//     FlagConnectionID (CONNECTION_ID(), FlagSessionStatus (SHOW [SESSION |
//     LOCAL] STATUS, SHOW PROFILE(S), SESSION_STATUS and SESSION_VARIABLES
//     anywhere as a word, FLUSH ... STATUS, SET [SESSION] profiling),
//     FlagSequence (NEXTVAL(, NEXT VALUE FOR), FlagRole (SET ROLE),
//     FlagHandler (HANDLER t OPEN). [RewriteSessionFuncs] substitutes known
//     values for some of them. FlagCall (CALL): what a procedure leaves on
//     the connection no reply reports.
//   - FlagTempTable (CREATE TEMPORARY ...), FlagDropTemp (DROP TEMPORARY
//     ...), FlagLockTables (LOCK TABLE(S), LOCK INSTANCE FOR BACKUP, FLUSH
//     ... WITH READ LOCK, FLUSH TABLES ... FOR EXPORT, BACKUP LOCK),
//     FlagUnlockTables, FlagPrepare, FlagDeallocate, FlagXA, FlagKill,
//     FlagLoadLocal (LOAD DATA|XML ... LOCAL INFILE).
//   - FlagAutocommitOff/On: a session-scoped assignment of autocommit to a
//     single literal 0/1/ON/OFF/TRUE/FALSE ('ON'/'OFF' too), anywhere in a
//     SET list; the last one wins. SET GLOBAL autocommit only sets
//     FlagGlobalSet (the most recent GLOBAL/SESSION keyword applies to the
//     assignments after it, as in MySQL). An expression or DEFAULT sets
//     neither flag. FlagSqlLogBinOff likewise for sql_log_bin.
//   - FlagGlobalSet: SET GLOBAL, PERSIST, PERSIST_ONLY, @@global.x,
//     @@persist.x.
//
// Flags found by looking at keywords and functions are only looked for in
// code: never in strings, quoted identifiers or comments (but in
// executable comments). They are not set from the body of a statement
// that does not run it: CREATE/ALTER of a procedure, function, trigger,
// event or view, and EXPLAIN without ANALYZE.
//
// Multi-statements: statements are separated by ';'. FlagMulti is set when
// a ';' is followed by another statement (not by only whitespace, comments
// and further ';'). Inside a stored-program body or BEGIN NOT ATOMIC, the
// ';' within BEGIN ... END (and CASE ... END) do not end the statement.
// The Class is that of the first statement; the Flags are the union over
// all statements (so SET @x = 1 in the second statement still sets
// FlagUserVar), except that the last autocommit setting wins.
//
// # Normalisation
//
// [Normalize] and the digest see the same normalised token stream:
//
//   - Literals — strings (with their N or _charset introducer), numbers,
//     hex and bit values — and ? placeholders become "?". Adjacent strings
//     ('a' 'b', which MySQL concatenates) become one "?". A + or - sign
//     right before a number is part of the literal when it cannot be a
//     binary operator (at the start, after an operator, "(", "," or a
//     keyword other than NULL, TRUE, FALSE and the like): "a = -5" becomes
//     "a = ?" but "a -5" becomes "a - ?". NULL, TRUE, FALSE and DEFAULT
//     are kept as keywords.
//   - "IN (" followed by a list of literals (NULL, TRUE, FALSE and DEFAULT
//     count as literals, and so do tuples of them) and ")" becomes
//     "IN (...)". In the row list of VALUES/VALUE, a run of rows of
//     literals becomes one "(...)" (or "ROW(...)"), and a row that
//     normalises like the row before it is dropped with its comma, so that
//     "VALUES (1, NOW()), (2, NOW())" becomes "VALUES (?, NOW())": the
//     digest does not depend on the number of rows.
//   - Comments are removed, executable comments are replaced by their
//     contents, and a trailing ';' is removed (';' between statements is
//     written as "; ").
//   - Keywords are written in upper case. Identifiers keep their case;
//     backquotes are removed when the name lexes back as the same
//     identifier (letters, digits, _, $ and non-ASCII, not starting with a
//     digit, not an upper-cased keyword), so `c` and c are the same.
//     A few keywords that are far more often column names (ID, STATUS,
//     DATA, VALUE, COMMENT, TEXT, ...) are kept as written, like
//     identifiers. Identifiers that start with a digit are backquoted.
//     User and system variable names are lower-cased (they are
//     case-insensitive); quoted user variables are kept as written.
//   - Spacing: tokens are separated by one space, except none after "("
//     and ".", none before ")", "," and ".", and none between a built-in
//     function or type keyword and its "(" — "COUNT(*)", "VARCHAR(?)",
//     but "t (a, b)", "IN (...)", "my_function (?)".
//
// So statements that differ only in literals, whitespace, comments,
// keyword case or optional backquotes have the same digest; for example
//
//	select  c from sbtest1 where id = 42          → SELECT c FROM sbtest1 WHERE id = ?
//	SELECT * FROM t WHERE a IN (1,2, 3) AND b='x' → SELECT * FROM t WHERE a IN (...) AND b = ?
//	INSERT INTO t (a,b) VALUES (1,'a'),(2,'b')    → INSERT INTO t (a, b) VALUES (...)
//
// Normalisation is idempotent: Normalize of normalised text returns it
// unchanged, so its digest is the digest of the original statement.
//
// The digest is FNV-1a (64-bit) of the normalised text ([DigestText]),
// computed incrementally by [Scan] without building the text. It is 0 only
// for an empty statement.
//
// # Schema names
//
// [ScanRefs] is Scan that also fills a [Refs] with the schema names the
// text names, in the same pass (for a listener that routes each statement
// to the cluster holding its schemas); Scan itself does not collect them.
// A name is recorded once, unquoted (backquotes removed, a doubled backquote as one), in
// order of first appearance, from every statement of a multi-statement
// text, and marked certain or a candidate:
//
//   - The qualifier of a qualified name: db of db.tbl, db.tbl.col,
//     db.func(...) and db.*. For a two-part a.b, a may as well be a table
//     or an alias qualifying a column, so it is a candidate (the caller
//     keeps the candidates that are schemas it knows), unless a table
//     stands there: after FROM (and the comma-separated tables after it),
//     JOIN, STRAIGHT_JOIN, INTO, UPDATE (not ON DUPLICATE KEY UPDATE),
//     DELETE, INSERT, REPLACE, TABLE, TABLES, TRUNCATE, REFERENCES, VIEW,
//     PROCEDURE, FUNCTION, TRIGGER, EVENT, SEQUENCE, TO in RENAME and
//     ALTER, and DESCRIBE/DESC/EXPLAIN, HANDLER and CALL at the start of a
//     statement, with TEMPORARY, IF [NOT] EXISTS, IGNORE, LOW_PRIORITY,
//     HIGH_PRIORITY, DELAYED and QUICK in between. A three-part name's
//     qualifier is certain.
//   - Names that are schemas, certain: USE db (also returned by
//     [Refs.Use], the last USE of the text), SHOW ... {FROM | IN} db
//     (TABLES, TABLE STATUS, TRIGGERS, EVENTS, OPEN TABLES, ...; for
//     COLUMNS, FIELDS, INDEX, INDEXES and KEYS the second FROM/IN),
//     CREATE/DROP/ALTER DATABASE|SCHEMA [IF [NOT] EXISTS] db and SHOW
//     CREATE DATABASE|SCHEMA db.
//
// Names in strings, comments (not executable ones) and variables
// (@x.y, @@global.x) are not references, nor a dot in a number. A keyword
// followed by a dot after a space is syntax, not a qualifier ("FROM .t").
// A Refs holds 8 names, and 128 bytes of names that need unescaping;
// beyond that [Refs.Overflow] is set and the list is incomplete.
//
// # Limits
//
// The scanner is a lexer with a little look-ahead, not a parser. Keywords
// are recognised by spelling, so an identifier spelled like a keyword is
// upper-cased and may be taken for syntax (a column named "begin" inside a
// CREATE PROCEDURE opens a block). Routing errs towards the writer: an
// unrecognised statement is ClassUnknown. Look-ahead for classification
// shares a budget proportional to the length of the text, so that no input
// takes more than linear time; a pathological statement may come out
// ClassUnknown.
package sqlscan
