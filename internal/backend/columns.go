package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// ExecColumns runs one statement (text protocol) and returns the column
// names and rows of its last result set, for statements whose column order
// is not fixed (SHOW SLAVE STATUS differs between versions and flavours).
// NULL values come back as "", as with Exec. Errors behave as with Exec.
func (c *Conn) ExecColumns(ctx context.Context, sql string) (cols []string, rows [][]string, err error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	c.Seq = 0
	buf, start := c.BeginPacket()
	buf = append(buf, mysqlproto.ComQuery)
	buf = append(buf, sql...)
	if err := c.FinishPacket(buf, start); err != nil {
		c.Broken = true
		return nil, nil, err
	}
	if err := c.Flush(); err != nil {
		c.Broken = true
		return nil, nil, err
	}
	cols, rows, err = c.readColumnResults()
	if err != nil {
		// A server error leaves the connection usable unless it is one
		// that closes it (NoteErr marked it); anything else is I/O.
		var se *mysqlproto.SQLError
		if !errors.As(err, &se) {
			c.Broken = true
		}
	}
	return cols, rows, err
}

func (c *Conn) readColumnResults() ([]string, [][]string, error) {
	var cols []string
	var rows [][]string
	for {
		p, err := c.ReadPacket()
		if err != nil {
			return nil, nil, err
		}
		switch p[0] {
		case mysqlproto.ErrPacket:
			return nil, nil, c.NoteErr(p)
		case mysqlproto.OKPacket:
			ok, good := mysqlproto.ParseOK(p, c.SessionTrack)
			if !good {
				return nil, nil, fmt.Errorf("%w: OK packet", mysqlproto.ErrMalformed)
			}
			if ok.Warnings > 0 {
				c.DiagDirty = true
			}
			c.ApplyOK(&ok)
			if ok.Status&mysqlproto.ServerMoreResultsExists == 0 {
				return cols, rows, nil
			}
			continue
		case mysqlproto.LocalInfilePacket:
			// Never send a file: an empty packet ends the request.
			if err := c.WritePacket(nil); err != nil {
				return nil, nil, err
			}
			if err := c.Flush(); err != nil {
				return nil, nil, err
			}
			continue
		}
		ncols, _, ok := mysqlproto.ReadLenEncInt(p, 0)
		if !ok {
			return nil, nil, fmt.Errorf("%w: column count", mysqlproto.ErrMalformed)
		}
		cols = make([]string, 0, ncols)
		for range ncols {
			p, err := c.ReadPacket()
			if err != nil {
				return nil, nil, err
			}
			name, ok := columnName(p)
			if !ok {
				return nil, nil, fmt.Errorf("%w: column definition", mysqlproto.ErrMalformed)
			}
			cols = append(cols, name)
		}
		if !c.DeprecateEOF {
			if _, err := c.ReadPacket(); err != nil {
				return nil, nil, err
			}
		}
		rows = rows[:0]
		for {
			p, err := c.ReadPacket()
			if err != nil {
				return nil, nil, err
			}
			if p[0] == mysqlproto.ErrPacket {
				return nil, nil, c.NoteErr(p)
			}
			if p[0] == mysqlproto.EOFPacket && len(p) < 0xffffff {
				var status, warnings uint16
				if c.DeprecateEOF {
					ok, _ := mysqlproto.ParseOK(p, c.SessionTrack)
					c.ApplyOK(&ok)
					status, warnings = ok.Status, ok.Warnings
				} else {
					e := mysqlproto.ParseEOF(p)
					status, warnings = e.Status, e.Warnings
				}
				if warnings > 0 {
					c.DiagDirty = true
				}
				if status&mysqlproto.ServerMoreResultsExists == 0 {
					return cols, rows, nil
				}
				break
			}
			row, err := textRow(p, int(ncols))
			if err != nil {
				return nil, nil, err
			}
			rows = append(rows, row)
		}
	}
}

// columnName is the name of a ColumnDefinition41 packet: the fifth
// length-encoded string, after catalog, schema, table and org_table.
func columnName(p []byte) (string, bool) {
	pos := 0
	for range 4 {
		var ok bool
		if _, pos, ok = mysqlproto.ReadLenEncString(p, pos); !ok {
			return "", false
		}
	}
	name, _, ok := mysqlproto.ReadLenEncString(p, pos)
	return string(name), ok
}

// textRow decodes a text-protocol row of n columns; NULL becomes "".
func textRow(p []byte, n int) ([]string, error) {
	row := make([]string, 0, n)
	pos := 0
	for range n {
		if pos < len(p) && p[pos] == 0xfb {
			row = append(row, "")
			pos++
			continue
		}
		v, next, ok := mysqlproto.ReadLenEncString(p, pos)
		if !ok {
			return nil, fmt.Errorf("%w: row", mysqlproto.ErrMalformed)
		}
		row = append(row, string(v))
		pos = next
	}
	return row, nil
}
