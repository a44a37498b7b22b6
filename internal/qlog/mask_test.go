package qlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const syntaxPrefix = "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use"

var maskMessageTests = []struct {
	code      uint16
	msg, want string
}{
	// Syntax errors quote the raw text, quotes and all.
	{1064, syntaxPrefix + " near 'USR 'app'@'%' IDENTIFIED BY 'Sekr1t-3'' at line 1", syntaxPrefix + " near ? at line ?"},
	{1064, syntaxPrefix + " near 'IDENTIFIED BY _binary'Sekr1t' PASSWORD EXPIRE' at line 1", syntaxPrefix + " near ? at line ?"},
	{1064, syntaxPrefix + " near '' at line 1", syntaxPrefix + " near ? at line ?"},
	// cut at 80 characters inside the password
	{1064, syntaxPrefix + " near 'REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_USER='repl', SOURCE_PASSWORD='Sekr' at line 1", syntaxPrefix + " near ? at line ?"},
	// a message cut short: no closing quote at all
	{1064, syntaxPrefix + " near 'IDENTIFIED BY 'Sekr1t", syntaxPrefix + " near ?"},
	{1064, syntaxPrefix + " near 'IDENTIFIED BY 'Sekr1t'", syntaxPrefix + " near ?"},
	{0, "Vigil: node1: " + syntaxPrefix + " near 'BY 'Sekr1t'' at line 1", "Vigil: node1: " + syntaxPrefix + " near ? at line ?"},
	// another language: the first quote that opens a string
	{1064, "Erreur de syntaxe près de 'BY 'Sekr1t'' à la ligne 1", "Erreur de syntaxe près de ? à la ligne ?"},
	{1149, "You have an error in your SQL syntax; check the manual", "You have an error in your SQL syntax; check the manual"},

	// Other messages: strings and numbers.
	{1396, "Operation ALTER USER failed for 'app'@'%'", "Operation ALTER USER failed for ?@?"},
	{1045, "Access denied for user 'app'@'127.0.0.1' (using password: YES)", "Access denied for user ?@? (using password: YES)"},
	{1146, "Table 'db.t' doesn't exist", "Table ? doesn't exist"},
	{1062, "Duplicate entry 'it's' for key 'PRIMARY'", "Duplicate entry ? for key ?"},
	{1062, `Duplicate entry 'a\'b' for key 'PRIMARY'`, "Duplicate entry ? for key ?"},
	{1062, "Duplicate entry 'a''b' for key 'PRIMARY'", "Duplicate entry ? for key ?"},
	{1231, `Variable 'x' can't be set to the value of "Sekr1t"`, "Variable ? can't be set to the value of ?"},
	{1366, "Incorrect integer value: 'Sekr1t' for column `db`.`t`.`c` at row 12", "Incorrect integer value: ? for column `db`.`t`.`c` at row ?"},
	{1292, "Truncated incorrect DOUBLE value: '1.5e3abc'", "Truncated incorrect DOUBLE value: ?"},
	{1094, "Unknown thread id: 12345", "Unknown thread id: ?"},
	{1105, "server version 10.11.19-MariaDB, charset utf8mb4, x86_64", "server version ?-MariaDB, charset utf8mb4, x86_64"},
	{1105, "a `name`` with quote`, 0x1F", "a `name`` with quote`, ?"},
	// unterminated
	{1105, "Incorrect value: 'Sekr1t", "Incorrect value: ?"},
	{1105, "Unknown column `Sekr1t", "Unknown column ?"},
	{1105, `Incorrect value: 'Sekr1t\' and more`, "Incorrect value: ?"},
	{0, "", ""},
}

func TestMaskMessage(t *testing.T) {
	for _, tt := range maskMessageTests {
		if got := maskMessage(tt.msg, tt.code); got != tt.want {
			t.Errorf("maskMessage(%q, %d)\n got %q\nwant %q", tt.msg, tt.code, got, tt.want)
		}
	}
}

// Masked statements hide every literal, an identifier left open at the
// end, and, after a syntax error, every name.
func TestMaskStatement(t *testing.T) {
	for _, tt := range []struct {
		code       uint16
		stmt, want string
	}{
		{0, "ALTER USER 'app'@'%' IDENTIFIED BY 'Sekr1t'", "ALTER USER ? @'%' IDENTIFIED BY ?"},
		{0, "SET PASSWORD FOR app = PASSWORD('Sekr1t')", "SET PASSWORD FOR app = PASSWORD (?)"},
		{1064, "ALTER USR 'app'@'%' IDENTIFIED BY 'Sekr1t'", "ALTER ? ? ? IDENTIFIED BY ?"},
		// a missing quote puts the password outside any string
		{1064, "CREATE USER 'app'@'% IDENTIFIED BY 'Sekr1t'", "CREATE USER ? ? ? ?"},
		{0, "CREATE USER `app IDENTIFIED BY 'Sekr1t'", "CREATE USER ?"},
		{0, "SELECT @'x IDENTIFIED BY Sekr1t", "SELECT ?"},
		{1064, "SELECT @'x IDENTIFIED BY 'Sekr1t'", "SELECT ? ? ?"},
	} {
		if got := string(maskStatement(nil, []byte(tt.stmt), tt.code)); got != tt.want {
			t.Errorf("maskStatement(%q, %d)\n got %q\nwant %q", tt.stmt, tt.code, got, tt.want)
		}
	}
}

// With statements masked, error messages are masked too, in query and
// auth entries; with statements full, they are written as they are.
func TestMaskedMessages(t *testing.T) {
	const (
		stmt = "ALTER USR 'app'@'%' IDENTIFIED BY 'Sekr1t-3'"
		msg  = syntaxPrefix + " near 'USR 'app'@'%' IDENTIFIED BY 'Sekr1t-3'' at line 1"
		auth = "Access denied for user 'Sekr1t-9'@'127.0.0.1' (using password: YES)"
	)
	for _, mode := range []string{"", StatementsMasked, StatementsFull} {
		t.Run("mode="+mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "q.log")
			l := startLogger(t, Config{Statements: mode, File: &FileConfig{Path: path}}, options{})
			e := queryEntry(1, stmt)
			e.ErrCode, e.Message = 1064, msg
			l.Log(e)
			l.Log(&Entry{Kind: KindAuth, User: "app", ErrCode: 1045, Message: auth})
			l.Close()
			lines := readLines(t, path)
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2", len(lines))
			}
			if mode == StatementsFull {
				if lines[0]["statement"] != stmt || lines[0]["message"] != msg || lines[1]["message"] != auth {
					t.Errorf("full mode changed the text: %v", lines)
				}
				return
			}
			file, _ := os.ReadFile(path)
			if strings.Contains(string(file), "Sekr1t") {
				t.Errorf("a secret in the log:\n%s", file)
			}
			if want := syntaxPrefix + " near ? at line ?"; lines[0]["message"] != want {
				t.Errorf("message %q, want %q", lines[0]["message"], want)
			}
			if want := "Access denied for user ?@? (using password: YES)"; lines[1]["message"] != want {
				t.Errorf("auth message %q, want %q", lines[1]["message"], want)
			}
		})
	}
}
