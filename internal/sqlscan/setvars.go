package sqlscan

import "strings"

// SetAssignments returns the session system variables a SET statement
// assigns, lower-case, in order: SET [SESSION|LOCAL] a = …, @@b = …,
// @@session.c = …; NAMES and CHARACTER SET stand for the character-set
// variables they change. User variables and GLOBAL/PERSIST assignments are
// left out. Nil when q is not such a SET statement.
func SetAssignments(q []byte) []string {
	budget := 1024 + len(q)
	lx := &headLexer{lx: NewLexer(q), budget: &budget}
	src := lx.src()
	t := lx.next()
	if t.Keyword != KwSet {
		return nil
	}
	t = lx.next()
	switch t.Keyword {
	case KwTransaction, KwResource, KwPassword, KwDefault, KwRole, KwStatement:
		return nil
	}
	var out []string
	global := false
	for {
		switch t.Keyword {
		case KwNames: // NAMES x [COLLATE y]
			out = append(out, "character_set_client", "character_set_connection", "character_set_results", "collation_connection")
			if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
				return out
			}
			t = lx.next()
			continue
		case KwCharset, KwCharacter: // CHARACTER SET x, CHARSET x
			out = append(out, "character_set_client", "character_set_connection", "character_set_results", "collation_connection")
			if t.Keyword == KwCharacter {
				lx.next() // SET
			}
			if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
				return out
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
		name, scopeGlobal, ok := setTarget(src, t, global)
		if !ok {
			return out
		}
		t = lx.next()
		if !isAssign(src, t) {
			return out
		}
		if name != nil && !scopeGlobal {
			out = append(out, strings.ToLower(string(name)))
		}
		if t, _ = skipValue(lx.next(), lx); t.Kind != TokComma {
			return out
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
