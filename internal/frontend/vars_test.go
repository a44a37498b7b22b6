package frontend

import (
	"slices"
	"testing"
)

// TestSessionVarsTracking: the client's own session_track_* settings
// decide what it is told; the defaults it started with are not changed
// under other sessions.
func TestSessionVarsTracking(t *testing.T) {
	d := builtinTrackDefaults()
	var v sessionVars
	v.resetTrack(d)
	if !v.track.Schema || v.track.StateChange || v.track.AllVars || !slices.Equal(v.track.Vars, d.filter.Vars) {
		t.Fatalf("defaults: %+v", v.track)
	}
	if v.noteTracking("autocommit", "OFF") || v.trackTouched {
		t.Fatal("autocommit taken for a tracking setting")
	}
	if !v.noteTracking("session_track_system_variables", " Autocommit , time_zone ") || !v.trackTouched {
		t.Fatal("session_track_system_variables not recorded")
	}
	if !slices.Equal(v.track.Vars, []string{"autocommit", "time_zone"}) {
		t.Errorf("tracked variables %q", v.track.Vars)
	}
	v.noteTracking("session_track_system_variables", "*")
	v.noteTracking("session_track_state_change", "ON")
	v.noteTracking("session_track_gtids", "OWN_GTID")
	v.noteTracking("session_track_schema", "OFF")
	if !v.track.AllVars || !v.track.StateChange || !v.track.GTIDs || v.track.Schema {
		t.Errorf("after four SETs: %+v", v.track)
	}
	if d.raw["session_track_system_variables"] == "*" || d.raw["session_track_schema"] != "ON" {
		t.Errorf("the shared defaults changed: %v", d.raw)
	}
	v.resetTrack(d)
	if v.track.AllVars || !v.track.Schema || v.trackRaw["session_track_gtids"] != "OFF" {
		t.Errorf("after reset: %+v %v", v.track, v.trackRaw)
	}
}

func TestSessionVarsAutoIsNull(t *testing.T) {
	var v sessionVars
	if v.autoIsNullOn() {
		t.Error("on by default")
	}
	for _, c := range []struct {
		val string
		on  bool
	}{{"1", true}, {"on", true}, {"ON", true}, {"0", false}, {"OFF", false}} {
		v.state.Set("sql_auto_is_null", c.val)
		if v.autoIsNullOn() != c.on {
			t.Errorf("sql_auto_is_null=%s: on %v", c.val, !c.on)
		}
	}
}
