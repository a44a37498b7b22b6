package sqlscan

// This file classifies one statement from its first tokens. The caller
// (scan.go) hands it the statement's first token and a copy of the lexer
// positioned after it; it reads as few tokens as it needs.

// head is what the first tokens of a statement say about it.
type head struct {
	class Class
	flags Flags
	// compound: BEGIN ... END blocks may hold ';' that do not end the
	// statement (stored program bodies, BEGIN NOT ATOMIC).
	compound bool
	// inert: the statement does not run its body now — it stores it
	// (procedure, function, trigger, event, view) or only explains it —
	// so flags found in the body are not about this session.
	inert bool
	// forEnd: offset after the FOR of MariaDB's SET STATEMENT ... FOR; a
	// FOR before it is not a locking clause.
	forEnd int
}

// maxNesting bounds the recursion through EXPLAIN, ANALYZE, WITH and
// SET STATEMENT ... FOR.
const maxNesting = 8

// headLexer is a lexer copy that shares a token budget with the scan, so
// that lookahead stays linear in the input however the statements nest.
// sets, when not nil, records the session @@names of the SET statement
// that starts the text (classifySet).
type headLexer struct {
	lx     Lexer
	budget *int
	sets   *setSites
}

func (h *headLexer) next() Token {
	if *h.budget <= 0 {
		if h.sets != nil {
			h.sets.over = true // not read to the end: Info.QualifySessionSets walks it
		}
		n := len(h.lx.src)
		return Token{Kind: TokEOF, Start: n, End: n}
	}
	*h.budget--
	return h.lx.Next()
}

func (h *headLexer) src() []byte { return h.lx.src }

func endOfStatement(t Token) bool { return t.Kind == TokEOF || t.Kind == TokSemicolon }

func isOp(src []byte, t Token, op string) bool {
	return t.Kind == TokOp && string(src[t.Start:t.End]) == op
}

func isAssign(src []byte, t Token) bool { return isOp(src, t, "=") || isOp(src, t, ":=") }

// classifyStmt classifies the statement that starts with t.
func classifyStmt(t Token, lx *headLexer, depth int) (h head) {
	for t.Kind == TokLParen {
		t = lx.next()
	}
	if depth > maxNesting || t.Kind != TokWord {
		return h
	}
	switch t.Keyword {
	case KwSelect, KwTable, KwValues, KwHelp:
		h.class = ClassRead
	case KwShow:
		h.class = ClassRead
		h.flags = classifyShow(lx)
	case KwWith:
		return classifyWith(lx, depth)
	case KwExplain, KwDescribe, KwDesc:
		return classifyExplain(lx.next(), lx, depth, false)
	case KwAnalyze:
		t = lx.next()
		switch t.Keyword {
		case KwTable, KwTables, KwNoWriteToBinlog, KwLocal:
			h.class = ClassWrite
			return h
		}
		return classifyExplain(t, lx, depth, true)
	case KwCall:
		h.class = ClassWrite
		h.flags |= FlagCall
	case KwInsert, KwUpdate, KwDelete, KwReplace, KwMerge, KwTruncate, KwRename, KwGrant,
		KwRevoke, KwDo, KwOptimize, KwRepair, KwCheck, KwChecksum,
		KwReset, KwPurge, KwInstall, KwUninstall, KwChange, KwStop, KwImport, KwCache,
		KwBinlog, KwClone:
		h.class = ClassWrite
	case KwHandler:
		h.class = ClassWrite
		h.flags = classifyHandler(lx)
	case KwIf, KwWhile, KwLoop, KwRepeat, KwCase:
		// MariaDB compound statements outside stored programs.
		h.class = ClassWrite
		h.compound = true
	case KwLoad:
		h.class = ClassWrite
		for i := 0; i < 6; i++ {
			t := lx.next()
			if t.Keyword == KwLocal {
				h.flags |= FlagLoadLocal
			}
			if t.Keyword == KwInfile || endOfStatement(t) {
				break
			}
		}
	case KwCreate, KwAlter:
		return classifyCreate(lx)
	case KwDrop:
		h.class = ClassWrite
		switch lx.next().Keyword {
		case KwTemporary:
			h.flags = FlagDropTemp
		case KwPrepare:
			h.class = ClassSession
			h.flags = FlagDeallocate
		}
	case KwFlush:
		h.class = ClassWrite
		var p1, p2 Keyword
		for t := lx.next(); !endOfStatement(t); t = lx.next() {
			k := t.Keyword
			if (k == KwLock && p1 == KwRead && p2 == KwWith) || (k == KwExport && p1 == KwFor) {
				h.flags |= FlagLockTables
			}
			if k == KwStatus { // FLUSH STATUS resets this connection's counters
				h.flags |= FlagSessionStatus
			}
			p2, p1 = p1, k
		}
	case KwLock:
		h.class = ClassSession
		switch lx.next().Keyword {
		case KwTable, KwTables, KwInstance:
			h.flags = FlagLockTables
		}
	case KwUnlock:
		h.class = ClassSession
		switch lx.next().Keyword {
		case KwTable, KwTables, KwInstance:
			h.flags = FlagUnlockTables
		}
	case KwBackup: // MariaDB BACKUP STAGE / LOCK / UNLOCK
		h.class = ClassSession
		switch lx.next().Keyword {
		case KwLock:
			h.flags = FlagLockTables
		case KwUnlock:
			h.flags = FlagUnlockTables
		}
	case KwPrepare:
		h.class = ClassSession
		h.flags = FlagPrepare
	case KwExecute:
		h.class = ClassSession
	case KwDeallocate:
		h.class = ClassSession
		h.flags = FlagDeallocate
	case KwBegin:
		t = lx.next()
		switch {
		case endOfStatement(t), t.Keyword == KwWork:
			h.class = ClassBegin
		case t.Keyword == KwNot: // BEGIN NOT ATOMIC ... END
			h.class = ClassWrite
			h.compound = true
		}
	case KwStart:
		if lx.next().Keyword != KwTransaction { // START SLAVE, START REPLICA, ...
			h.class = ClassWrite
			return h
		}
		h.class = ClassBegin
		var prev Keyword
		for t := lx.next(); !endOfStatement(t); t = lx.next() {
			switch {
			case t.Keyword == KwOnly && prev == KwRead:
				h.class = ClassBeginReadOnly
				h.flags |= FlagReadOnlyTrx
			case t.Keyword == KwWrite && prev == KwRead:
				h.class = ClassBegin
				h.flags &^= FlagReadOnlyTrx
			}
			prev = t.Keyword
		}
	case KwCommit:
		h.class = ClassCommit
		h.flags = chainRelease(lx.next(), lx)
	case KwRollback:
		t = lx.next()
		if t.Keyword == KwWork {
			t = lx.next()
		}
		if t.Keyword == KwTo {
			h.class = ClassSavepoint
			return h
		}
		h.class = ClassRollback
		h.flags = chainRelease(t, lx)
	case KwSavepoint:
		h.class = ClassSavepoint
	case KwRelease:
		if lx.next().Keyword == KwSavepoint {
			h.class = ClassSavepoint
		}
	case KwXA:
		h.flags = FlagXA
		switch lx.next().Keyword {
		case KwStart, KwBegin:
			h.class = ClassBegin
		case KwCommit:
			h.class = ClassCommit
		case KwRollback:
			h.class = ClassRollback
		case KwRecover:
			h.class = ClassRead
		default: // XA END, XA PREPARE
			h.class = ClassSession
		}
	case KwSet:
		return classifySet(lx, depth)
	case KwUse:
		h.class = ClassUse
	case KwKill:
		h.class = ClassSession
		h.flags = FlagKill
	case KwShutdown, KwRestart:
		h.class = ClassSession
	case KwGet:
		switch lx.next().Keyword {
		case KwDiagnostics, KwCurrent, KwStacked:
			h.class = ClassSession
			h.flags = FlagDiagnostics
			// GET DIAGNOSTICS @x = ...: the targets may be user variables.
			for t := lx.next(); !endOfStatement(t); t = lx.next() {
				if t.Kind == TokUserVar {
					h.flags |= FlagUserVar
					break
				}
			}
		}
	}
	return h
}

// classifyShow reads what follows SHOW for the statements that read one
// server connection's own state: SHOW WARNINGS | ERRORS, SHOW COUNT(*)
// WARNINGS | ERRORS (the diagnostics area), SHOW [SESSION | LOCAL] STATUS
// and SHOW PROFILE(S).
func classifyShow(lx *headLexer) Flags {
	t := lx.next()
	switch t.Keyword {
	case KwWarnings, KwErrors:
		return FlagDiagnostics
	case KwCount:
		for range 4 { // ( * ) WARNINGS
			t = lx.next()
			if t.Keyword == KwWarnings || t.Keyword == KwErrors {
				return FlagDiagnostics
			}
			if endOfStatement(t) {
				break
			}
		}
	case KwSession, KwLocal:
		if lx.next().Keyword == KwStatus {
			return FlagSessionStatus
		}
	case KwStatus, KwProfile, KwProfiles:
		return FlagSessionStatus
	}
	return 0
}

// classifyHandler reads HANDLER tbl OPEN [AS alias]: the table handler
// stays open on the server connection.
func classifyHandler(lx *headLexer) Flags {
	for range 5 { // tbl | db . tbl, then OPEN
		t := lx.next()
		if t.Keyword == KwOpen {
			return FlagHandler
		}
		if endOfStatement(t) {
			break
		}
	}
	return 0
}

// chainRelease reads the rest of COMMIT/ROLLBACK for [AND [NO] CHAIN] and
// [[NO] RELEASE], starting at t.
func chainRelease(t Token, lx *headLexer) Flags {
	var f Flags
	var prev Keyword
	for ; !endOfStatement(t); t = lx.next() {
		switch t.Keyword {
		case KwChain:
			if prev != KwNo {
				f |= FlagChain
			}
		case KwRelease:
			if prev != KwNo {
				f |= FlagRelease
			}
		}
		prev = t.Keyword
	}
	return f
}

// classifyExplain classifies EXPLAIN/DESCRIBE/ANALYZE from the token after
// the first keyword. EXPLAIN does not run the statement, so it is a read
// whatever the statement; EXPLAIN ANALYZE and MariaDB's ANALYZE run it, so
// they are reads only if the statement is.
func classifyExplain(t Token, lx *headLexer, depth int, analyze bool) head {
	for done := false; !done; {
		switch t.Keyword {
		case KwAnalyze:
			analyze = true
		case KwExtended, KwPartitions:
		case KwFormat: // FORMAT = JSON
			if t = lx.next(); isOp(lx.src(), t, "=") {
				lx.next()
			}
		default:
			done = true
			continue
		}
		t = lx.next()
	}
	h := head{class: ClassRead, inert: !analyze}
	if analyze {
		inner := classifyStmt(t, lx, depth+1)
		if inner.class != ClassRead {
			h.class = ClassWrite
		}
		h.flags = inner.flags | FlagExplainAnalyze
	}
	return h
}

// classifyWith skips a CTE list and classifies the statement after it.
func classifyWith(lx *headLexer, depth int) head {
	d := 0
	afterParen := false
	for {
		t := lx.next()
		switch t.Kind {
		case TokEOF, TokSemicolon:
			return head{}
		case TokLParen:
			if d == 0 && afterParen { // WITH c AS (...) (SELECT ...)
				return classifyStmt(t, lx, depth+1)
			}
			d++
		case TokRParen:
			if d > 0 {
				d--
			}
		case TokWord:
			if d == 0 {
				switch t.Keyword {
				case KwSelect, KwTable, KwValues, KwInsert, KwUpdate, KwDelete, KwReplace:
					return classifyStmt(t, lx, depth+1)
				}
			}
		}
		afterParen = t.Kind == TokRParen
	}
}

// classifyCreate classifies CREATE and ALTER: always writes, but a stored
// program or view is inert: its body must not set flags.
func classifyCreate(lx *headLexer) head {
	h := head{class: ClassWrite}
	// Skip OR REPLACE, DEFINER = ..., ALGORITHM = ..., SQL SECURITY ...,
	// AGGREGATE, TEMPORARY until the kind of object.
	for i := 0; i < 32; i++ {
		t := lx.next()
		if endOfStatement(t) {
			return h
		}
		switch t.Keyword {
		case KwTemporary:
			h.flags |= FlagTempTable
		case KwProcedure, KwFunction, KwTrigger, KwEvent, KwPackage:
			h.compound, h.inert = true, true
			return h
		case KwView:
			h.inert = true
			return h
		case KwTable, KwIndex, KwDatabase, KwSchema, KwUser:
			return h
		}
	}
	return h
}

// classifySet classifies SET from the token after SET.
func classifySet(lx *headLexer, depth int) head {
	h := head{class: ClassSet}
	src := lx.src()
	sets := lx.sets
	if depth > 0 {
		sets = nil
	}
	t := lx.next()
	switch t.Keyword {
	case KwTransaction, KwResource:
		return h
	case KwPassword, KwDefault: // SET PASSWORD, SET DEFAULT ROLE
		h.class = ClassWrite
		return h
	case KwRole: // SET ROLE: the connection's privileges change
		h.class = ClassWrite
		h.flags = FlagRole
		return h
	case KwStatement: // MariaDB SET STATEMENT var=value [, ...] FOR <statement>
		sets = nil
		probe := *lx
		if !isAssign(src, probe.next()) {
			return classifySetStatement(lx, depth)
		}
	}
	global := false // scope set by the last GLOBAL/SESSION keyword
	for {
		switch t.Keyword {
		case KwNames, KwCharset, KwCharacter: // NAMES x [COLLATE y], CHARACTER SET x
			if probe := *lx; sets != nil && t.Keyword == KwCharacter && probe.next().Keyword != KwSet {
				sets.over = true // the walk of QualifySessionSets takes any token for SET
			}
			if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
				return h
			}
			t = lx.next()
			continue
		case KwGlobal, KwPersist, KwPersistOnly:
			global = true
			h.flags |= FlagGlobalSet
			t = lx.next()
		case KwSession, KwLocal:
			global = false
			t = lx.next()
		}
		if t.Keyword == KwTransaction { // SET GLOBAL|SESSION TRANSACTION ...
			if probe := *lx; sets != nil && isAssign(src, probe.next()) {
				sets.over = true // TRANSACTION = ...: a name to the walk of QualifySessionSets
			}
			return h
		}
		target := t
		name, scopeGlobal, ok := setTarget(src, t, global)
		switch {
		case !ok:
			return h
		case t.Kind == TokUserVar:
			h.flags |= FlagUserVar
		case t.Kind == TokSysVar && scopeGlobal:
			h.flags |= FlagGlobalSet
		}
		t = lx.next()
		for t.Kind == TokDot { // SET NEW.col = ... in a trigger: not a system variable
			name = nil
			sets = nil
			lx.next()
			t = lx.next()
		}
		if !isAssign(src, t) {
			return h
		}
		if sets != nil && target.Kind == TokSysVar && !scopeGlobal && name != nil && target.End-target.Start == len(name)+2 {
			sets.add(target.Start + 2)
		}
		first := lx.next()
		var n int
		t, n = skipValue(first, lx)
		if n == 1 && !scopeGlobal && name != nil {
			switch {
			case equalFold(name, "autocommit"):
				switch boolValue(src, first) {
				case 0:
					h.flags = h.flags&^FlagAutocommitOn | FlagAutocommitOff
				case 1:
					h.flags = h.flags&^FlagAutocommitOff | FlagAutocommitOn
				}
			case equalFold(name, "sql_log_bin"):
				if boolValue(src, first) == 0 {
					h.flags |= FlagSqlLogBinOff
				}
			}
		}
		if !scopeGlobal && name != nil && isTrackVar(name) {
			h.flags |= FlagSessionTrack
		}
		if !scopeGlobal && name != nil && equalFold(name, "profiling") {
			// Profiles are kept per server connection.
			h.flags |= FlagSessionStatus
		}
		if t.Kind != TokComma {
			return h
		}
		t = lx.next()
	}
}

// skipValue reads from t up to the ',' that ends an assignment in a SET
// list, or the end of the statement, and returns that token and the number
// of tokens before it.
func skipValue(t Token, lx *headLexer) (Token, int) {
	d, n := 0, 0
	for ; ; t = lx.next() {
		switch t.Kind {
		case TokEOF, TokSemicolon:
			return t, n
		case TokComma:
			if d == 0 {
				return t, n
			}
		case TokLParen:
			d++
		case TokRParen:
			if d > 0 {
				d--
			}
		}
		n++
	}
}

// classifySetStatement classifies MariaDB's SET STATEMENT ... FOR <stmt>
// by <stmt>.
func classifySetStatement(lx *headLexer, depth int) head {
	d := 0
	for {
		t := lx.next()
		switch t.Kind {
		case TokEOF, TokSemicolon:
			return head{class: ClassSet}
		case TokLParen:
			d++
		case TokRParen:
			if d > 0 {
				d--
			}
		case TokWord:
			if d == 0 && t.Keyword == KwFor {
				inner := classifyStmt(lx.next(), lx, depth+1)
				inner.forEnd = max(inner.forEnd, t.End)
				return inner
			}
		}
	}
}

// sysVarName splits @@[scope.]name into the name and whether the scope is
// global (GLOBAL, PERSIST, PERSIST_ONLY). @@name is the session value.
func sysVarName(v []byte) (name []byte, global bool) {
	body := v[2:]
	for i, c := range body {
		if c != '.' {
			continue
		}
		scope := body[:i]
		switch {
		case equalFold(scope, "global"), equalFold(scope, "persist"), equalFold(scope, "persist_only"):
			return body[i+1:], true
		case equalFold(scope, "session"), equalFold(scope, "local"):
			return body[i+1:], false
		}
		break
	}
	return body, false
}

// boolValue returns 1 or 0 for a literal boolean (1, 0, ON, OFF, TRUE,
// FALSE, 'ON', 'OFF', ...), or -1 if t is not one.
func boolValue(src []byte, t Token) int {
	var v []byte
	switch t.Kind {
	case TokNumber, TokWord:
		v = src[t.Start:t.End]
	case TokString:
		if t.Unterminated(src) || src[t.Start] != '\'' && src[t.Start] != '"' {
			return -1
		}
		v = src[t.Start+1 : t.End-1]
	default:
		return -1
	}
	switch {
	case string(v) == "1", equalFold(v, "on"), equalFold(v, "true"):
		return 1
	case string(v) == "0", equalFold(v, "off"), equalFold(v, "false"):
		return 0
	}
	return -1
}

// equalFold reports whether b equals the lower-case ASCII string s, ignoring
// ASCII case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
