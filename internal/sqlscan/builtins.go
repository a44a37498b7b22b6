package sqlscan

// Stored functions run on the writer.
//
// A SELECT that calls a stored function may write (the function can run
// INSERT, and on a replica an account with READ_ONLY ADMIN gets past
// read_only and breaks replication). A call of a name MariaDB does not
// know as built-in is therefore FlagSideEffect: the read goes to the
// writer. A built-in Vigil does not know costs only a read on the primary.
//
// builtins_list.go is generated on a MariaDB 10.11 server (as root over
// the socket) with:
//
//	q() { mariadb -uroot -N -e "$1"; }
//	{ q "SELECT FUNCTION FROM information_schema.SQL_FUNCTIONS"
//	  q "SELECT WORD FROM information_schema.KEYWORDS"
//	  q "SELECT t.name FROM mysql.help_topic t JOIN mysql.help_category c USING (help_category_id)
//	     WHERE c.name LIKE '%Function%' OR c.name = 'Geographic Features'"
//	  strings /usr/sbin/mariadbd | grep -E '^(ST_|MBR|JSON_|REGEXP_|SYS_|NATURAL_SORT|SFORMAT|KDF|VEC_|INET|IS_IPV|UUID|WSREP_|MASTER_|SOURCE_|COLUMN_|DES_|AES_|SHA|MD5|BIT_|TO_|FROM_|UNIX_|UTC_|LAST_|LOAD_|CONVERT_|DATE_|TIME_|STR_|SUBSTRING_|FIND_|FORMAT_|GET_|RELEASE_|IS_|NAME_|PERIOD_|SEC_|ROW_|RANDOM_|RAND)[A-Z0-9_]*$'
//	} | tr a-z A-Z | grep -E '^[A-Z_][A-Z0-9_]*$' | sort -u
//
// then formatted as the array below.

// builtins is the set of builtinNames, built once and never modified.
var builtins = func() map[string]struct{} {
	m := make(map[string]struct{}, len(builtinNames)+len(functionKeywords))
	for _, n := range builtinNames {
		m[n] = struct{}{}
	}
	for _, n := range functionKeywords {
		m[n] = struct{}{}
	}
	return m
}()

// isBuiltin reports whether w (any case) names a built-in function, type
// or syntax word that may be followed by "(".
func isBuiltin(w []byte) bool {
	var buf [64]byte
	if len(w) > len(buf) {
		return false
	}
	for i, c := range w {
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := builtins[string(buf[:len(w)])]
	return ok
}
