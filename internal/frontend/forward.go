package frontend

import (
	"errors"
	"fmt"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// respKind is the shape of a server's reply to a command.
type respKind uint8

const (
	respQuery      respKind = iota // OK | ERR | LOCAL INFILE | result sets (text), possibly several
	respExecute                    // same, binary rows; a cursor ends after the metadata
	respFetch                      // rows then a terminator
	respFieldList                  // column definitions then a terminator
	respSimple                     // one OK or ERR
	respStatistics                 // one string packet
)

// outcome is what a forwarded reply told Vigil.
type outcome struct {
	status   uint16
	err      *mysqlproto.SQLError // the server answered with an error
	sent     bool                 // something reached the client
	reached  bool                 // the server may have read the command (run it, or closed over it): never sent elsewhere
	affected uint64
	cursor   bool
	rows     int64
	// What the last reply said of the statement, for the session's view of
	// its previous statement: warnings, the insert id of an OK, and
	// whether it ended with a result set (ROW_COUNT() -1) or an OK.
	warnings  uint16
	insertID  uint64
	resultSet bool
	setRows   int64 // rows of the last result set
}

// errBackend wraps I/O failures on the server side, as opposed to the
// client side, so the session can tell them apart.
type errBackend struct{ err error }

func (e errBackend) Error() string { return "server connection: " + e.err.Error() }
func (e errBackend) Unwrap() error { return e.err }

type errClient struct{ err error }

func (e errClient) Error() string { return "client connection: " + e.err.Error() }
func (e errClient) Unwrap() error { return e.err }

// forward streams a server's reply to the client frame by frame, without
// decoding rows, and tracks status flags and session changes. Frames keep
// their sequence ids: the client's command and Vigil's copy of it both
// start at 0.
func (s *Session) forward(c *backend.Conn, kind respKind) (outcome, error) {
	var o outcome
	cl := s.client
	deprecateEOF := c.DeprecateEOF
	readFrame := func() ([]byte, error) {
		if c.Buffered() == 0 && cl.Pending() > 0 {
			// About to block on the server: let the client have what we have.
			if err := cl.Flush(); err != nil {
				return nil, errClient{err}
			}
		}
		f, err := c.ReadFrame()
		if err != nil {
			c.Broken = true
			return nil, errBackend{err}
		}
		return f, nil
	}
	write := func(f []byte) error {
		o.sent = true
		if s.capturing {
			s.captureFrame(f)
		}
		if err := cl.WriteFrame(f); err != nil {
			return errClient{err}
		}
		return nil
	}
	// errFrame passes a server error on, or Vigil's own when a rule's
	// timeout killed the statement. An error that closes the connection
	// (backend.ClosesConnection) marks it broken: it is never reused.
	errFrame := func(f []byte) error {
		o.err = c.NoteErr(mysqlproto.FramePayload(f))
		if !s.timedOut.Load() {
			return write(f)
		}
		o.err = s.timeoutError(c)
		o.sent = true
		cl.Seq = mysqlproto.FrameSeq(f)
		if err := cl.WritePacket(mysqlproto.AppendErr(s.scratch[:0], o.err)); err != nil {
			return errClient{err}
		}
		return nil
	}
	// okFrame handles an OK (or OK-style terminator) frame: session
	// tracking, then passes it on, stripped for clients that did not ask
	// for session tracking.
	okFrame := func(f []byte) error {
		p := mysqlproto.FramePayload(f)
		ok, good := mysqlproto.ParseOK(p, c.SessionTrack)
		if !good {
			c.Broken = true
			return errBackend{fmt.Errorf("%w: OK packet", mysqlproto.ErrMalformed)}
		}
		o.status = ok.Status
		o.affected = ok.AffectedRows
		o.warnings = ok.Warnings
		if mysqlproto.IsOKPacket(p) {
			o.insertID = ok.LastInsertID
			o.resultSet = false
		}
		if len(ok.SessionState) > 0 {
			s.applySessionState(c, &ok)
			if s.sessionTrack {
				// Vigil's server connections track every variable and state
				// changes; the client sees only what it asked to track.
				if out, changed := mysqlproto.FilterSessionState(s.scratch[:0], p, ok, &s.track); changed {
					s.scratch = out
					cl.Seq = mysqlproto.FrameSeq(f)
					o.sent = true
					if s.capturing {
						s.captureStripped(mysqlproto.FrameSeq(f), out)
					}
					if err := cl.WritePacket(out); err != nil {
						return errClient{err}
					}
					return nil
				}
			}
		}
		if s.sessionTrack || !ok.Tail {
			return write(f)
		}
		s.scratch = mysqlproto.StripSessionState(s.scratch[:0], p, ok)
		cl.Seq = mysqlproto.FrameSeq(f)
		o.sent = true
		if s.capturing {
			s.captureStripped(mysqlproto.FrameSeq(f), s.scratch)
		}
		if err := cl.WritePacket(s.scratch); err != nil {
			return errClient{err}
		}
		return nil
	}
	// copyN passes n frames on (column or parameter definitions).
	copyN := func(n uint64) error {
		for range n {
			f, err := readFrame()
			if err != nil {
				return err
			}
			if err := write(f); err != nil {
				return err
			}
		}
		return nil
	}
	// rows passes rows on until the terminator and returns its status.
	rows := func() (done bool, err error) {
		cont := false
		for {
			f, err := readFrame()
			if err != nil {
				return true, err
			}
			p := mysqlproto.FramePayload(f)
			if cont {
				cont = len(p) == mysqlproto.MaxPayload
				if err := write(f); err != nil {
					return true, err
				}
				continue
			}
			switch {
			case mysqlproto.IsErrPacket(p):
				return true, errFrame(f)
			case mysqlproto.IsRowsEnd(p, deprecateEOF):
				if deprecateEOF {
					if err := okFrame(f); err != nil {
						return true, err
					}
				} else {
					e := mysqlproto.ParseEOF(p)
					o.status, o.warnings = e.Status, e.Warnings
					if err := write(f); err != nil {
						return true, err
					}
				}
				return o.status&mysqlproto.ServerMoreResultsExists == 0, nil
			default:
				o.rows++
				o.setRows++
				cont = len(p) == mysqlproto.MaxPayload
				if err := write(f); err != nil {
					return true, err
				}
			}
		}
	}

	switch kind {
	case respStatistics:
		f, err := readFrame()
		if err != nil {
			return o, err
		}
		return o, write(f)
	case respFetch:
		_, err := rows()
		return o, err
	case respFieldList:
		for {
			f, err := readFrame()
			if err != nil {
				return o, err
			}
			p := mysqlproto.FramePayload(f)
			if mysqlproto.IsErrPacket(p) {
				return o, errFrame(f)
			}
			if mysqlproto.IsEOF(p) {
				o.status = mysqlproto.ParseEOF(p).Status
				return o, write(f)
			}
			if mysqlproto.IsEOFHeader(p) && deprecateEOF {
				return o, okFrame(f)
			}
			if err := write(f); err != nil {
				return o, err
			}
		}
	}

	for {
		f, err := readFrame()
		if err != nil {
			return o, err
		}
		p := mysqlproto.FramePayload(f)
		h, good := mysqlproto.Header(p)
		if !good {
			c.Broken = true
			return o, errBackend{fmt.Errorf("%w: empty reply", mysqlproto.ErrMalformed)}
		}
		switch h {
		case mysqlproto.OKPacket:
			if err := okFrame(f); err != nil {
				return o, err
			}
			if kind == respSimple || o.status&mysqlproto.ServerMoreResultsExists == 0 {
				return o, nil
			}
			continue
		case mysqlproto.ErrPacket:
			return o, errFrame(f)
		case mysqlproto.EOFPacket:
			if kind == respSimple {
				// COM_SET_OPTION and friends answer with EOF.
				o.status = mysqlproto.ParseEOF(p).Status
				return o, write(f)
			}
		case mysqlproto.LocalInfilePacket:
			// LOAD DATA LOCAL, as a query or as a prepared statement.
			if kind == respQuery || kind == respExecute {
				if err := s.localInfile(c, f); err != nil {
					return o, err
				}
				continue
			}
		}
		if kind == respSimple {
			c.Broken = true
			return o, errBackend{fmt.Errorf("%w: unexpected reply 0x%02x", mysqlproto.ErrMalformed, h)}
		}
		// A result set: column count, definitions, [EOF], rows, terminator.
		o.resultSet, o.setRows, o.insertID = true, 0, 0
		ncols, good := mysqlproto.ParseColumnCount(p)
		if !good {
			c.Broken = true
			return o, errBackend{fmt.Errorf("%w: column count", mysqlproto.ErrMalformed)}
		}
		if err := write(f); err != nil {
			return o, err
		}
		if err := copyN(ncols); err != nil {
			return o, err
		}
		if !deprecateEOF {
			f, err := readFrame()
			if err != nil {
				return o, err
			}
			o.status = mysqlproto.ParseEOF(mysqlproto.FramePayload(f)).Status
			if err := write(f); err != nil {
				return o, err
			}
			// A cursor holds the rows back only when the execute asked for
			// one: MariaDB also sets the flag on result sets of a CALL
			// whose procedure opened a cursor, and sends the rows.
			if kind == respExecute && s.cursorReq && o.status&mysqlproto.ServerStatusCursorExists != 0 {
				o.cursor = true
				return o, nil
			}
		}
		done, err := rows()
		if err != nil || done || o.err != nil {
			if kind == respExecute && s.cursorReq && o.status&mysqlproto.ServerStatusCursorExists != 0 {
				o.cursor = true
			}
			return o, err
		}
	}
}

// localInfile relays LOAD DATA LOCAL INFILE: the server's request goes to
// the client, the file's packets come back until an empty one. A failed
// write to the server loses the connection (the server may have closed it
// in the middle of the file, after an error that closes the connection).
func (s *Session) localInfile(c *backend.Conn, req []byte) error {
	err := s.relayInfile(c, req)
	var eb errBackend
	if errors.As(err, &eb) {
		c.Broken = true
	}
	return err
}

func (s *Session) relayInfile(c *backend.Conn, req []byte) error {
	if s.caps&mysqlproto.CapabilityClientLocalFiles == 0 {
		// The client cannot send files: tell the server there is none.
		c.Seq = mysqlproto.FrameSeq(req) + 1
		if err := c.WritePacket(nil); err != nil {
			return errBackend{err}
		}
		if err := c.Flush(); err != nil {
			return errBackend{err}
		}
		return nil
	}
	if err := s.client.WriteFrame(req); err != nil {
		return errClient{err}
	}
	if err := s.client.Flush(); err != nil {
		return errClient{err}
	}
	c.Seq = mysqlproto.FrameSeq(req) + 1
	for {
		f, err := s.client.ReadFrame()
		if err != nil {
			return errClient{err}
		}
		if err := c.WriteFrame(f); err != nil {
			return errBackend{err}
		}
		if mysqlproto.IsEmptyFrame(f) {
			break
		}
	}
	if err := c.Flush(); err != nil {
		return errBackend{err}
	}
	// The server's answer continues the sequence the client started.
	c.Seq = s.client.Seq
	return nil
}

// readPrepare reads a COM_STMT_PREPARE reply. With toClient it forwards
// it, with the statement id replaced by clientID; holdMissing keeps back
// an error for a missing object (the caller tries the writer).
func (s *Session) readPrepare(c *backend.Conn, toClient bool, clientID uint32, holdMissing bool) (*backend.ServerStmt, *mysqlproto.SQLError, error) {
	f, err := c.ReadFrame()
	if err != nil {
		c.Broken = true
		return nil, nil, errBackend{err}
	}
	p := mysqlproto.FramePayload(f)
	if mysqlproto.IsErrPacket(p) {
		se := c.NoteErr(p)
		if toClient && !(holdMissing && missingObject(se.Code)) {
			if err := s.client.WriteFrame(f); err != nil {
				return nil, se, errClient{err}
			}
		}
		return nil, se, nil
	}
	ok, good := mysqlproto.ParseStmtPrepareOK(p)
	if !good {
		c.Broken = true
		return nil, nil, errBackend{fmt.Errorf("%w: prepare reply", mysqlproto.ErrMalformed)}
	}
	st := &backend.ServerStmt{ID: ok.StmtID, Columns: ok.Columns, Params: ok.Params, Warnings: ok.Warnings}
	if toClient {
		mysqlproto.PutStmtID(p, clientID)
		if err := s.client.WriteFrame(f); err != nil {
			return st, nil, errClient{err}
		}
	}
	n := int(st.Params) + int(st.Columns)
	if !c.DeprecateEOF {
		if st.Params > 0 {
			n++
		}
		if st.Columns > 0 {
			n++
		}
	}
	for range n {
		f, err := c.ReadFrame()
		if err != nil {
			c.Broken = true
			return st, nil, errBackend{err}
		}
		if toClient {
			if err := s.client.WriteFrame(f); err != nil {
				return st, nil, errClient{err}
			}
		}
	}
	return st, nil, nil
}
