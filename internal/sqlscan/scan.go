package sqlscan

// Scan lexes q once and returns its class, flags and digest. It never
// allocates. See the package documentation for the rules.
func Scan(q []byte) Info {
	n := normalizer{h: fnvOffset64}
	c := classifier{start: true, budget: 1024 + len(q)/2}
	run(q, &n, &c)
	return c.info(&n)
}

// ScanRefs is Scan that also fills r with the schema names q names (see
// [Refs]), in the same pass. It returns what Scan(q) returns; r is reset
// first. It never allocates.
func ScanRefs(q []byte, r *Refs) Info {
	r.src, r.n, r.over, r.hasUse, r.nbuf = q, 0, false, false, 0 // not the arrays: only r.n of them are read
	n := normalizer{h: fnvOffset64}
	c := classifier{start: true, budget: 1024 + len(q)/2}
	runRefs(q, &n, &c, &refScanner{out: r})
	return c.info(&n)
}

func (c *classifier) info(n *normalizer) Info {
	c.facts.end()
	var digest uint64
	if n.size > 0 {
		digest = nonZero(n.h)
	}
	return Info{Class: c.class, Flags: c.flags, Digest: digest, First: c.facts.first, Facts: c.facts.facts, sets: c.sets, kill: c.facts.kill}
}

// run is the single pass: each token goes to the classifier (unless nil)
// and then to the normalizer.
func run(q []byte, n *normalizer, c *classifier) {
	lx := NewLexer(q)
	for {
		t := lx.Next()
		if t.Kind == TokEOF {
			return
		}
		if c != nil {
			c.observe(t, &lx)
		}
		if k := n.token(t, &lx); k != TokEOF && c != nil {
			c.skipped(k)
		}
	}
}

// runRefs is run for ScanRefs: each token also goes to r. It is a loop of
// its own so that Scan's loop stays exactly as it was: with a nil-checked
// *refScanner in run, Scan measured up to 10-20% slower (on a loaded
// machine, where the noise was as large).
func runRefs(q []byte, n *normalizer, c *classifier, r *refScanner) {
	lx := NewLexer(q)
	for t := lx.Next(); t.Kind != TokEOF; t = lx.Next() {
		c.observe(t, &lx)
		r.observe(t)
		if k := n.token(t, &lx); k != TokEOF {
			c.skipped(k)
			r.skipped()
		}
	}
}

// classifier follows statement boundaries, classifies each statement from
// its head and looks at every token for the flags that may appear anywhere.
type classifier struct {
	class  Class // of the first statement
	flags  Flags // union over all statements
	budget int   // tokens that head lookahead may still read
	stmts  int

	start bool // the next token starts a statement
	inner bool // the next token starts a statement inside a compound statement
	cur   head // the current top-level statement
	depth int  // BEGIN/CASE ... END nesting in a compound statement
	end   bool // an END was seen; the next token says what it closes

	prevKind  TokenKind
	prevKw    Keyword // keyword of the previous token, 0 if it was not a keyword
	prev2Kw   Keyword
	prevStart int
	prevEnd   int
	// the token before the previous one
	prev2Kind  TokenKind
	prev2Start int
	prev2End   int

	facts factTracker
	sets  setSites
}

func (c *classifier) observe(t Token, lx *Lexer) {
	c.budget++
	c.facts.observe(t, lx.src, c.prevKind, c.prevKw, c.prev2Kw)
	if t.Kind == TokSemicolon {
		if c.cur.compound {
			if c.end {
				c.end = false
				c.close()
			}
			if c.depth > 0 { // a ';' inside BEGIN ... END
				c.inner = true
				c.shift(t)
				return
			}
		}
		c.start = true
		c.shift(t)
		return
	}
	switch {
	case c.start:
		c.start = false
		c.stmts++
		if c.stmts > 1 {
			c.flags |= FlagMulti
		}
		h := c.classify(t, lx)
		if c.stmts == 1 {
			c.class = h.class
		}
		c.cur = h
		c.depth, c.end, c.inner = 0, false, false
		c.merge(h.flags)
	case c.inner:
		c.inner = false
		if !c.cur.inert {
			c.merge(c.classify(t, lx).flags)
		}
	}
	if c.cur.compound {
		c.block(t)
	}
	if !c.cur.inert {
		c.anywhere(t, lx.src)
	}
	c.shift(t)
}

func (c *classifier) classify(t Token, lx *Lexer) head {
	hl := headLexer{lx: *lx, budget: &c.budget}
	if c.facts.ntok == 1 && t.Kind == TokWord && t.Keyword == KwSet {
		hl.sets = &c.sets // the text starts with SET: record its session @@names
	}
	return classifyStmt(t, &hl, 0)
}

// merge adds a statement's flags; the last autocommit setting wins.
func (c *classifier) merge(f Flags) {
	if f&(FlagAutocommitOn|FlagAutocommitOff) != 0 {
		c.flags &^= FlagAutocommitOn | FlagAutocommitOff
	}
	c.flags |= f
}

func (c *classifier) shift(t Token) {
	c.prev2Kind, c.prev2Start, c.prev2End = c.prevKind, c.prevStart, c.prevEnd
	c.prev2Kw = c.prevKw
	c.prevKw = t.Keyword
	c.prevKind = t.Kind
	c.prevStart = t.Start
	c.prevEnd = t.End
}

// skipped records that the normalizer consumed tokens (a literal list or
// a signed number) ending with one of kind k.
func (c *classifier) skipped(k TokenKind) {
	c.prev2Kw = c.prevKw
	c.prevKw = kwNone
	c.prevKind = k
}

// block tracks BEGIN ... END and CASE ... END nesting inside a compound
// statement, so that its inner ';' do not end it. END IF, END LOOP, END
// WHILE and END REPEAT close constructs that were not counted.
func (c *classifier) block(t Token) {
	if c.end {
		c.end = false
		switch t.Keyword {
		case KwIf, KwLoop, KwWhile, KwRepeat:
			return
		case KwCase:
			c.close()
			return
		}
		c.close()
	}
	switch t.Keyword {
	case KwBegin, KwCase:
		c.depth++
	case KwEnd:
		c.end = true
	}
	switch t.Keyword {
	case KwBegin, KwAtomic, KwThen, KwElse, KwDo, KwLoop, KwRepeat:
		c.inner = true
	}
}

func (c *classifier) close() {
	if c.depth > 0 {
		c.depth--
	}
}

// anywhere sets the flags that a token and the two before it imply,
// wherever they are in the statement.
func (c *classifier) anywhere(t Token, src []byte) {
	var f Flags
	switch t.Kind {
	case TokWord:
		switch t.Keyword {
		case KwSQLCalcFoundRows:
			f = FlagCalcFoundRows
		case KwUpdate, KwShare: // FOR UPDATE, FOR SHARE
			if c.prevKw == KwFor && c.prevStart >= c.cur.forEnd {
				f = FlagForUpdate
			}
		case KwMode: // LOCK IN SHARE MODE
			if c.prevKw == KwShare && c.prev2Kw == KwIn {
				f = FlagForUpdate
			}
		case KwFor: // NEXT VALUE FOR seq, PREVIOUS VALUE FOR seq
			if c.prevKw == KwValue && (c.prev2Kw == KwNext || c.prev2Kw == KwPrevious) {
				f = FlagSideEffect
				if c.prev2Kw == KwNext {
					f |= FlagSequence
				}
			}
		case kwNone:
			// information_schema.SESSION_STATUS and SESSION_VARIABLES
			// describe one server connection.
			if n := t.End - t.Start; n == 14 || n == 17 {
				if w := src[t.Start:t.End]; equalFold(w, "session_status") || equalFold(w, "session_variables") {
					f = FlagSessionStatus
				}
			}
		case KwOutfile, KwDumpfile:
			if c.prevKw == KwInto {
				f = FlagSideEffect
			}
		case KwProcesslist:
			// SHOW PROCESSLIST, information_schema.PROCESSLIST: the
			// writer's, where the sessions' statements run.
			if c.cur.class == ClassRead {
				f = FlagSideEffect
			}
		}
	case TokLParen:
		if c.cur.class == ClassRead && c.prev2Kw != KwWith && !(c.prev2Kind == TokWord && isWord(src, c.prev2Start, c.prev2End, "RECURSIVE")) &&
			(c.prevKind == TokQuotedIdent || (c.prevKind == TokWord && c.prevKw == kwNone && !isBuiltin(src[c.prevStart:c.prevEnd]))) {
			// A read that calls a stored function (builtins.go): it may
			// write. (Not a CTE's column list: WITH [RECURSIVE] name (...).)
			f = FlagSideEffect
		}
		switch c.prevKw {
		case KwGetLock:
			f = FlagGetLock | FlagSideEffect
		case KwReleaseLock, KwReleaseAllLocks:
			f = FlagReleaseLock | FlagSideEffect
		case KwFoundRows:
			f = FlagFoundRows | FlagSideEffect
		case KwLastInsertID:
			f = FlagLastInsertID | FlagSideEffect
		case KwRowCount:
			f = FlagRowCount | FlagSideEffect
		case KwNextval:
			f = FlagSequence | FlagSideEffect
		case KwConnectionID:
			f = FlagConnectionID
		case KwIsFreeLock, KwIsUsedLock, KwSetval, KwLastval:
			f = FlagSideEffect
		}
	case TokUserVar:
		if c.prevKw == KwInto {
			f = FlagUserVar | FlagSideEffect
		}
	case TokOp:
		if c.prevKind == TokUserVar && t.End-t.Start == 2 && src[t.Start] == ':' {
			f = FlagUserVar | FlagSideEffect
		}
	case TokSysVar:
		name, _ := sysVarName(src[t.Start:t.End])
		switch {
		case equalFold(name, "identity") || equalFold(name, "last_insert_id"):
			f = FlagLastInsertID | FlagSideEffect
		case equalFold(name, "warning_count") || equalFold(name, "error_count"):
			f = FlagDiagnostics
		case equalFold(name, "pseudo_thread_id"):
			if c.cur.class != ClassSet {
				f = FlagConnectionID // the thread id, as CONNECTION_ID()
			}
		case isTrackVar(name):
			if c.cur.class != ClassSet {
				f = FlagSessionTrack // a read of the client's own tracking
			}
		}
	}
	if f != 0 {
		if c.cur.class == ClassSet {
			f &^= FlagSideEffect // a SET is routed as a SET; the flag is about reads
		}
		c.flags |= f
	}
}

// isWord reports whether src[start:end] is w, ignoring ASCII case.
func isWord(src []byte, start, end int, w string) bool {
	return end-start == len(w) && upperEqual(src[start:end], w)
}

// isTrackVar: a session_track_* variable that is a client's choice of what
// it is told (session_track_transaction_info is an ordinary variable).
func isTrackVar(name []byte) bool {
	return len(name) > 14 && equalFold(name[:14], "session_track_") && !equalFold(name, "session_track_transaction_info")
}
