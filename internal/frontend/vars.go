package frontend

import (
	"context"
	"strings"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// sessionVars is the session's state that lives on server connections
// and is replayed on each one the session uses: the schema and session
// variables (backend.State; backend.Conn.Sync makes a connection match),
// and what the client asked session tracking to report of them. The
// server connections track every variable (backend); the client sees
// only what its own session_track_* settings ask for.
type sessionVars struct {
	state backend.State
	// sessionTrack: the client has CLIENT_SESSION_TRACK.
	sessionTrack bool
	// track is what the client asked session tracking to tell it (its
	// own session_track_* settings; the server's defaults until it sets
	// them).
	track        mysqlproto.TrackFilter
	trackTouched bool              // the statement changed the client's tracking (restore the server connection's)
	trackRaw     map[string]string // the client's session_track_* values (shared with the defaults until changed)
	// setBuf holds a SET statement with its @@ targets qualified
	// (sqlscan.Info.QualifySessionSets).
	setBuf []byte
}

// autoIsNull reports whether the session has sql_auto_is_null on and
// the statement tests something for IS NULL.
func (v *sessionVars) autoIsNull(info sqlscan.Info) bool {
	return info.Facts&sqlscan.FactIsNull != 0 && v.autoIsNullOn()
}

// execInfo is st's classification for one execute: with
// sql_auto_is_null on, a read testing IS NULL reads the connection's
// LAST_INSERT_ID().
func (v *sessionVars) execInfo(st *clientStmt) sqlscan.Info {
	info := st.info
	if st.isNullRead && v.autoIsNullOn() {
		info.Flags |= sqlscan.FlagLastInsertID | sqlscan.FlagSideEffect
	}
	return info
}

// autoIsNullOn reports whether the session has sql_auto_is_null on.
func (v *sessionVars) autoIsNullOn() bool {
	for _, x := range v.state.Vars() {
		if x.Name == "sql_auto_is_null" {
			return x.Value == "1" || strings.EqualFold(x.Value, "ON")
		}
	}
	return false
}

// trackDefaults is the session tracking a new session has: the servers'
// global session_track_* values (MariaDB's defaults until a SET GLOBAL
// through Vigil says otherwise).
type trackDefaults struct {
	filter mysqlproto.TrackFilter
	raw    map[string]string // by variable name
}

func builtinTrackDefaults() *trackDefaults {
	return &trackDefaults{
		filter: mysqlproto.TrackFilter{Vars: mysqlproto.DefaultTrackVars, Schema: true},
		raw: map[string]string{
			"session_track_system_variables": strings.Join(mysqlproto.DefaultTrackVars, ","),
			"session_track_schema":           "ON", "session_track_state_change": "OFF", "session_track_gtids": "OFF",
		},
	}
}

// resetTrack gives the client the tracking d.
func (v *sessionVars) resetTrack(d *trackDefaults) {
	v.track, v.trackRaw = d.filter, d.raw // trackRaw is copied before it changes
}

// refreshTrackDefaults reads the servers' global session_track_* values
// after a SET GLOBAL of one of them through Vigil (c ran it).
func (s *Session) refreshTrackDefaults(c *backend.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts().ConnectTimeout)
	defer cancel()
	res, err := c.Exec(ctx, "SELECT @@GLOBAL.session_track_system_variables, @@GLOBAL.session_track_schema, @@GLOBAL.session_track_state_change")
	if err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 3 {
		return
	}
	r := res.Rows[0]
	d := &trackDefaults{raw: map[string]string{
		"session_track_system_variables": r[0], "session_track_schema": r[1],
		"session_track_state_change": r[2], "session_track_gtids": "OFF",
	}}
	d.filter = trackFilterOf(d.raw)
	s.srv.trackDefault.Store(d)
}

// trackFilterOf turns session_track_* values into what the client is
// told.
func trackFilterOf(raw map[string]string) mysqlproto.TrackFilter {
	t := mysqlproto.TrackFilter{Schema: onValue(raw["session_track_schema"]), StateChange: onValue(raw["session_track_state_change"])}
	g := raw["session_track_gtids"]
	t.GTIDs = g != "" && !strings.EqualFold(g, "OFF")
	vars := raw["session_track_system_variables"]
	if strings.TrimSpace(vars) == "*" {
		t.AllVars = true
		return t
	}
	for _, v := range strings.Split(vars, ",") {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
			t.Vars = append(t.Vars, v)
		}
	}
	return t
}

// noteTracking records a change of the client's own session tracking, as
// the server reported it (its connections track every variable, these
// too): the client is told only what it now asks for, and Vigil's own
// tracking is restored on the connection after the statement.
func (v *sessionVars) noteTracking(name, value string) bool {
	switch name {
	case "session_track_system_variables", "session_track_schema", "session_track_state_change", "session_track_gtids":
	default:
		return false
	}
	raw := make(map[string]string, len(v.trackRaw)+1)
	for k, x := range v.trackRaw {
		raw[k] = x
	}
	raw[name] = value
	v.trackRaw = raw
	v.track = trackFilterOf(raw)
	v.trackTouched = true
	return true
}

// restoreTracking gives c back the session tracking Vigil needs after the
// client changed its own (a client's SET session_track_system_variables =
// 'x' would otherwise blind Vigil to the session state of every later user
// of c). While the client's tracking was in force the server may not have
// reported the statement's other assignments (nor a change of
// session_track_system_variables itself), so every variable the SET
// statement q assigned is read back first.
func (s *Session) restoreTracking(c *backend.Conn, q []byte) {
	s.vars.trackTouched = false
	ctx, cancel := context.WithTimeout(context.Background(), s.opts().ConnectTimeout)
	defer cancel()
	if names := sqlscan.SetAssignments(q); len(names) > 0 {
		sel := "SELECT @@session." + strings.Join(names, ", @@session.")
		res, err := c.Exec(ctx, sel)
		if err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == len(names) {
			for i, n := range names {
				switch {
				case s.vars.noteTracking(n, res.Rows[0][i]):
				case !backend.Untracked(n):
					c.State.Set(n, res.Rows[0][i])
					s.vars.state.Set(n, res.Rows[0][i])
				}
			}
			s.vars.trackTouched = false
		} else if err != nil {
			c.Broken = true
		}
	}
	if err := c.RestoreTracking(ctx); err != nil {
		c.Broken = true
		s.srv.log.Warn("could not restore session tracking on a server connection after the client changed its own; the connection is closed",
			"session", s.id, "server", c.Server, "err", err)
	}
}

func onValue(v string) bool { return strings.EqualFold(v, "ON") || v == "1" }

// applySessionState records the changes an OK packet reports on both the
// server connection and the session.
func (s *Session) applySessionState(c *backend.Conn, ok *mysqlproto.OK) {
	_ = mysqlproto.EachSessionChange(ok.SessionState, func(ch mysqlproto.SessionChange) {
		switch ch.Type {
		case mysqlproto.SessionTrackSystemVariables:
			name := lowerASCII(ch.Name)
			if name == "last_gtid" {
				if len(ch.Value) > 0 {
					s.ryw.wrote(string(ch.Value), c.Index)
					s.srv.noteGTID(s.ryw.gtid)
				}
				return
			}
			if backendUntracked(name) {
				if strings.HasPrefix(name, "session_track_") {
					s.vars.noteTracking(name, string(ch.Value))
				}
				return
			}
			v := string(ch.Value)
			c.State.Set(name, v)
			s.vars.state.Set(name, v)
		case mysqlproto.SessionTrackGTIDs:
			// MySQL with session_track_gtids=OWN_GTID: the GTID(s) of the
			// transaction this session just committed.
			if len(ch.Name) > 0 {
				s.ryw.wrote(string(ch.Name), c.Index)
				s.srv.noteGTID(s.ryw.gtid)
			}
		case mysqlproto.SessionTrackSchema:
			db := string(ch.Name)
			// The server reports the name in its system character set.
			c.State.SetSchemaIn(db, backend.TrackedCharset)
			s.vars.state.SetSchemaIn(db, backend.TrackedCharset)
		}
	})
}

func backendUntracked(name string) bool { return backend.Untracked(name) }

func lowerASCII(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			out := make([]byte, len(b))
			for i, c := range b {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				out[i] = c
			}
			return string(out)
		}
	}
	return string(b)
}
