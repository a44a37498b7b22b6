package sqlscan

import "strings"

// SetAssignments returns the session system variables a SET statement
// assigns, lower-case, in order: SET [SESSION|LOCAL] a = …, @@b = …,
// @@session.c = …; NAMES and CHARACTER SET stand for the character-set
// variables they change. User variables and GLOBAL/PERSIST assignments are
// left out. Nil when q is not such a SET statement.
func SetAssignments(q []byte) []string {
	var out []string
	walkSet(q, func(_ Token, name []byte, global bool) {
		if name != nil && !global {
			out = append(out, strings.ToLower(string(name)))
		}
	}, func() {
		out = append(out, "character_set_client", "character_set_connection", "character_set_results", "collation_connection")
	})
	return out
}

// qualifySessionSets is Info.QualifySessionSets for a SET statement whose
// assignments Scan did not record (more than maxSetSites, or beyond its
// look-ahead): it walks the statement again.
func qualifySessionSets(dst, q []byte) ([]byte, bool) {
	var at []int
	walkSet(q, func(t Token, name []byte, global bool) {
		if t.Kind == TokSysVar && !global && name != nil && t.End-t.Start == len(name)+2 {
			at = append(at, t.Start+2)
		}
	}, nil)
	if len(at) == 0 {
		return dst, false
	}
	pos := 0
	for _, i := range at {
		dst = append(dst, q[pos:i]...)
		dst = append(dst, "SESSION."...)
		pos = i
	}
	return append(dst, q[pos:]...), true
}

// walkSet calls onVar for every assignment of a SET statement with its
// target token, the system variable's name (nil for a user variable) and
// whether it is global, and charset for each NAMES or CHARACTER SET.
func walkSet(q []byte, onVar func(t Token, name []byte, global bool), charset func()) {
	budget := 1024 + len(q)
	lx := &headLexer{lx: NewLexer(q), budget: &budget}
	src := lx.src()
	t := lx.next()
	if t.Keyword != KwSet {
		return
	}
	t = lx.next()
	switch t.Keyword {
	case KwTransaction, KwResource, KwPassword, KwDefault, KwRole, KwStatement:
		return
	}
	global := false
	for {
		switch t.Keyword {
		case KwNames, KwCharset, KwCharacter: // NAMES x [COLLATE y], CHARACTER SET x, CHARSET x
			if charset != nil {
				charset()
			}
			if t.Keyword == KwCharacter {
				lx.next() // SET
			}
			if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
				return
			}
			t = lx.next()
			continue
		case KwGlobal, KwPersist, KwPersistOnly:
			global = true
			t = lx.next()
		case KwSession, KwLocal:
			global = false
			t = lx.next()
		}
		target := t
		name, scopeGlobal, ok := setTarget(src, t, global)
		if !ok {
			return
		}
		t = lx.next()
		if !isAssign(src, t) {
			return
		}
		onVar(target, name, scopeGlobal)
		if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
			return
		}
		t = lx.next()
	}
}

// setTarget reads the variable an assignment of SET starts with: a system
// variable's name (nil for a user variable) and whether it is global
// (global: the statement's scope so far). ok is false when t starts no
// assignment.
func setTarget(src []byte, t Token, global bool) (name []byte, isGlobal, ok bool) {
	switch t.Kind {
	case TokUserVar:
		return nil, global, true
	case TokSysVar:
		name, isGlobal = sysVarName(src[t.Start:t.End])
		return name, isGlobal, true
	case TokWord:
		return src[t.Start:t.End], global, true
	case TokQuotedIdent:
		if !t.Unterminated(src) {
			name = src[t.Start+1 : t.End-1]
		}
		return name, global, true
	}
	return nil, global, false
}
