package shardmove

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mariaDB is a DB on one connection of go-sql-driver/mysql: a move's
// statements depend on each other (STOP SLAVE before SET GLOBAL
// gtid_slave_pos), so they run on one session, in order.
type mariaDB struct {
	db *sql.DB
}

var _ DB = (*mariaDB)(nil)

// Dial is the real Dialer.
func Dial(addr, user, password string) (DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", addr
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &mariaDB{db: db}, nil
}

func (m *mariaDB) Exec(ctx context.Context, q string) error {
	_, err := m.db.ExecContext(ctx, q)
	return err
}

func (m *mariaDB) Query(ctx context.Context, q string) ([][]string, error) {
	rows, err := m.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := [][]string{cols}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		r := make([]string, len(cols))
		for i, v := range vals {
			r[i] = v.String
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (m *mariaDB) Close() error { return m.db.Close() }
