package flavor

import "strings"

// Foreign returns the words of statement q that this flavour does not
// speak: on MySQL 8.4 every word with SLAVE or MASTER in it (the statements,
// CHANGE MASTER's MASTER_* options, rpl_semi_sync_master_* and
// log_slave_updates are gone); on MySQL MariaDB's GTID functions and
// variables, on MariaDB MySQL's. Tests hold every statement Vigil sends
// to it; nil means none.
func (f Flavor) Foreign(q string) []string {
	var bad []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		u := strings.ToUpper(w)
		switch {
		case f == MySQL84 && (strings.Contains(u, "SLAVE") || strings.Contains(u, "MASTER")):
			bad = append(bad, w)
		case f.MySQL() && mariadbOnly[u]:
			bad = append(bad, w)
		case !f.MySQL() && mysqlOnly[u]:
			bad = append(bad, w)
		}
	}
	return bad
}

var mariadbOnly = map[string]bool{
	"MASTER_GTID_WAIT": true, "MASTER_USE_GTID": true, "GTID_CURRENT_POS": true, "GTID_BINLOG_POS": true,
	"GTID_SLAVE_POS": true, "GTID_BINLOG_STATE": true, "RPL_SEMI_SYNC_SLAVE_KILL_CONN_TIMEOUT": true,
}

var mysqlOnly = map[string]bool{
	"WAIT_FOR_EXECUTED_GTID_SET": true, "GTID_EXECUTED": true, "SUPER_READ_ONLY": true,
	"SOURCE_AUTO_POSITION": true, "MASTER_AUTO_POSITION": true, "LOG_REPLICA_UPDATES": true,
}
