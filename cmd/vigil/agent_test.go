package main

import "testing"

// `vigil agent` is a mode of this binary.
func TestAgentCommand(t *testing.T) {
	if code := realMain([]string{"agent", "help"}); code != 0 {
		t.Errorf("vigil agent help: exit %d, want 0", code)
	}
	if code := realMain([]string{"agent", "run"}); code != 1 {
		t.Errorf("vigil agent run without --config: exit %d, want 1", code)
	}
}
