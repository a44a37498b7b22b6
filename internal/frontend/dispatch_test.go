package frontend

import (
	"testing"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// TestCommandTable: which commands are statements (the previous
// statement's connection comes back for them) and whose outcome becomes
// the previous statement; every other byte is refused.
func TestCommandTable(t *testing.T) {
	statements := map[byte]bool{
		mysqlproto.ComQuery: true, mysqlproto.ComStmtExecute: true, mysqlproto.ComInitDB: true,
		mysqlproto.ComFieldList: false, mysqlproto.ComStatistics: false, mysqlproto.ComResetConnection: false,
		mysqlproto.ComChangeUser: false, mysqlproto.ComStmtReset: false, mysqlproto.ComStmtFetch: false,
		mysqlproto.ComProcessKill: false,
	}
	handled := map[byte]bool{
		mysqlproto.ComQuit: true, mysqlproto.ComPing: true, mysqlproto.ComStmtPrepare: true,
		mysqlproto.ComStmtSendLongData: true, mysqlproto.ComStmtClose: true, mysqlproto.ComSetOption: true,
		mysqlproto.ComBinlogDump: true, mysqlproto.ComBinlogDumpGTID: true, mysqlproto.ComRegisterSlave: true,
	}
	for b := range 256 {
		c, cmd := commands[b], byte(b)
		outcome, stmt := statements[cmd]
		switch {
		case stmt:
			if c.run == nil || !c.statement || c.outcome != outcome {
				t.Errorf("command 0x%02x: statement %v outcome %v, want a statement with outcome %v", cmd, c.statement, c.outcome, outcome)
			}
		case handled[cmd]:
			if c.run == nil || c.statement || c.outcome {
				t.Errorf("command 0x%02x: handled %v statement %v outcome %v, want handled only", cmd, c.run != nil, c.statement, c.outcome)
			}
		case c.run != nil:
			t.Errorf("command 0x%02x has a handler", cmd)
		}
	}
}
