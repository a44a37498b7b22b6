package backend

import (
	"hash/maphash"
	"slices"
	"strings"
)

// State is the replayable part of a MySQL session: the default schema and
// the session variables changed since the connection was opened, as the
// server reported them through session tracking. Sessions and server
// connections each have one; a connection serves a session after its State
// has been made Equal to the session's.
type State struct {
	Schema string
	// SchemaCharset is the character set Schema's bytes are in (the
	// client's, or the one the server reported them in), "" for the
	// connection's handshake one; it matters only for a non-ASCII name.
	SchemaCharset string
	vars          []Var // sorted by Name
	hash          uint64
}

// Var is one session variable and its value, as the server reports it.
type Var struct{ Name, Value string }

var seed = maphash.MakeSeed()

// Equal reports whether two states are the same.
func (s *State) Equal(o *State) bool {
	return s.Schema == o.Schema && s.Satisfies(o)
}

// Satisfies reports whether a connection in state s can serve a session in
// state want: same variables and the same schema. A session without a
// default schema needs a connection without one: a connection's schema
// would answer its unqualified names and DATABASE().
func (s *State) Satisfies(want *State) bool {
	o := want
	if s.hash != o.hash || len(s.vars) != len(o.vars) || s.Schema != o.Schema {
		return false
	}
	for i := range s.vars {
		if s.vars[i] != o.vars[i] {
			return false
		}
	}
	return true
}

// Hash summarises the variables (not the schema): equal states have equal
// hashes.
func (s *State) Hash() uint64 { return s.hash }

// Vars returns the variables (read-only).
func (s *State) Vars() []Var { return s.vars }

// Get returns a variable's value.
func (s *State) Get(name string) (string, bool) {
	i, ok := slices.BinarySearchFunc(s.vars, name, func(v Var, n string) int { return strings.Compare(v.Name, n) })
	if !ok {
		return "", false
	}
	return s.vars[i].Value, true
}

// Set records a variable's value. Names are lower-cased.
func (s *State) Set(name, value string) {
	name = strings.ToLower(name)
	i, ok := slices.BinarySearchFunc(s.vars, name, func(v Var, n string) int { return strings.Compare(v.Name, n) })
	if ok {
		if s.vars[i].Value == value {
			return
		}
		s.vars[i].Value = value
	} else {
		s.vars = slices.Insert(s.vars, i, Var{name, value})
	}
	s.rehash()
}

// SetSchema records the default schema.
func (s *State) SetSchema(db string) { s.Schema, s.SchemaCharset = db, "" }

// SetSchemaIn records the default schema, its name in charset.
func (s *State) SetSchemaIn(db, charset string) { s.Schema, s.SchemaCharset = db, charset }

// Clone returns an independent copy.
func (s *State) Clone() State {
	return State{Schema: s.Schema, SchemaCharset: s.SchemaCharset, vars: slices.Clone(s.vars), hash: s.hash}
}

// Reset empties the state (after COM_RESET_CONNECTION or COM_CHANGE_USER).
func (s *State) Reset(schema string) {
	s.vars = s.vars[:0]
	s.Schema = schema
	s.rehash()
}

func (s *State) rehash() {
	if len(s.vars) == 0 {
		s.hash = 0 // the zero State, which sessions start with
		return
	}
	var h maphash.Hash
	h.SetSeed(seed)
	for _, v := range s.vars {
		h.WriteByte(0)
		h.WriteString(v.Name)
		h.WriteByte(1)
		h.WriteString(v.Value)
	}
	s.hash = h.Sum64()
}

// ReplaySQL returns the statement that turns a connection in state from
// into state to (without the schema, which goes by COM_INIT_DB), or "" if
// no variable differs. base holds the values a fresh connection had for
// variables the handshake set (character sets); other variables revert to
// DEFAULT.
func ReplaySQL(from, to *State, base map[string]string) string {
	var b strings.Builder
	add := func(name, value string, isDefault bool) {
		if b.Len() == 0 {
			b.WriteString("SET SESSION ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(name)
		b.WriteString(" = ")
		if isDefault {
			if bv, ok := base[name]; ok {
				writeValue(&b, name, bv)
			} else {
				b.WriteString("DEFAULT")
			}
			return
		}
		writeValue(&b, name, value)
	}
	for _, v := range to.vars {
		if cur, ok := from.Get(v.Name); !ok || cur != v.Value {
			add(v.Name, v.Value, false)
		}
	}
	for _, v := range from.vars {
		if _, ok := to.Get(v.Name); !ok {
			add(v.Name, "", true)
		}
	}
	return b.String()
}

func writeValue(b *strings.Builder, name, v string) {
	if isNumeric(v) {
		b.WriteString(v)
		return
	}
	if v == "" && strings.HasPrefix(name, "character_set_") {
		b.WriteString("NULL")
		return
	}
	b.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\'', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}

func isNumeric(v string) bool {
	if v == "" {
		return false
	}
	dot := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '-' && i == 0 && len(v) > 1:
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return true
}

// Untracked reports variables Vigil itself sets on every server connection
// and must not replay or compare.
// session_track_transaction_info is a client's choice like any other
// variable (Vigil does not need it): it is replayed. last_insert_id and
// identity are the connection's LAST_INSERT_ID(), which Vigil follows per
// session itself (frontend/prev.go), never replayed as a setting.
func Untracked(name string) bool {
	return (strings.HasPrefix(name, "session_track_") && name != "session_track_transaction_info") ||
		name == "last_gtid" || name == "last_insert_id" || name == "identity"
}
