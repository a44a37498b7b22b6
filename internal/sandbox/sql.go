package sandbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// socketConfig logs in as root over a unix socket. ioTimeout bounds every
// read and write (0: only the context does).
func socketConfig(socket, db string, ioTimeout time.Duration) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = socket
	cfg.DBName = db
	cfg.Timeout = 2 * time.Second
	cfg.ReadTimeout = ioTimeout
	cfg.WriteTimeout = ioTimeout
	cfg.MultiStatements = true
	return cfg
}

// result is the rows of one or more result sets; nil cells are NULL.
type result struct {
	cols [][]string
	rows [][]*string
}

// query runs stmt as root over a socket and collects every result set.
func query(ctx context.Context, socket, stmt string, ioTimeout time.Duration) (*result, error) {
	conn, err := mysql.NewConnector(socketConfig(socket, "", ioTimeout))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, stmt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &result{}
	for {
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			raw := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range raw {
				ptrs[i] = &raw[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			row := make([]*string, len(cols))
			for i, r := range raw {
				if r != nil {
					v := string(r)
					row[i] = &v
				}
			}
			res.cols = append(res.cols, cols)
			res.rows = append(res.rows, row)
		}
		if !rows.NextResultSet() {
			break
		}
	}
	return res, rows.Err()
}

// strings renders every row with NULL as "NULL", like `mariadb -B`.
func (r *result) strings() [][]string {
	out := make([][]string, len(r.rows))
	for i, row := range r.rows {
		out[i] = make([]string, len(row))
		for j, c := range row {
			if c == nil {
				out[i][j] = "NULL"
			} else {
				out[i][j] = *c
			}
		}
	}
	return out
}

// maps renders each row as column name → value ("" for NULL).
func (r *result) maps() []map[string]string {
	out := make([]map[string]string, len(r.rows))
	for i, row := range r.rows {
		m := make(map[string]string, len(row))
		for j, c := range row {
			if c != nil {
				m[r.cols[i][j]] = *c
			} else {
				m[r.cols[i][j]] = ""
			}
		}
		out[i] = m
	}
	return out
}

// SQL runs one statement (or several separated by ;) on a node as root
// over its unix socket and returns the rows of every result set, NULL as
// "NULL". The context bounds it; errors carry the server's message.
func (s *Sandbox) SQL(ctx context.Context, node, stmt string) ([][]string, error) {
	n, err := s.Node(node)
	if err != nil {
		return nil, err
	}
	res, err := query(ctx, n.Socket, stmt, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", node, err)
	}
	return res.strings(), nil
}

// Exec runs statements on a node as root and discards any rows.
func (s *Sandbox) Exec(ctx context.Context, node string, stmts ...string) error {
	for _, st := range stmts {
		if _, err := s.SQL(ctx, node, st); err != nil {
			return err
		}
	}
	return nil
}

// RootDB opens a database handle on a node as root over its socket; the
// caller closes it.
func (s *Sandbox) RootDB(node string) (*sql.DB, error) {
	n, err := s.Node(node)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(socketConfig(n.Socket, "", 0))
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// ping checks that a node answers a query over its socket.
func ping(ctx context.Context, socket string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := query(ctx, socket, "SELECT 1", timeout)
	return err
}

// globalStatus reads some global status variables (names upper or lower
// case) from a node.
func globalStatus(ctx context.Context, socket string, timeout time.Duration, names ...string) (map[string]string, error) {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = sqlString(strings.ToUpper(n))
	}
	res, err := query(ctx, socket, "SELECT UPPER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ("+strings.Join(q, ",")+")", timeout)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, row := range res.strings() {
		out[strings.ToLower(row[0])] = row[1]
	}
	return out, nil
}
