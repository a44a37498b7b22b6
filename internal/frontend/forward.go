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
	r := relay{s: s, c: c, cl: s.client, deprecateEOF: c.DeprecateEOF}
	var err error
	switch kind {
	case respStatistics:
		var f []byte
		if f, err = r.readFrame(); err == nil {
			err = r.write(f)
		}
	case respFetch:
		_, err = r.rows()
	case respFieldList:
		err = r.fieldList()
	default:
		err = r.replies(kind)
	}
	return r.o, err
}

// relay is one reply on its way from a server connection to the client:
// what forward knows so far (o) and the steps it takes. It lives on
// forward's stack; nothing in it is allocated per reply or per row.
type relay struct {
	s            *Session
	c            *backend.Conn
	cl           *mysqlproto.Conn
	o            outcome
	deprecateEOF bool
}

// readFrame reads the server's next frame, flushing what the client has
// pending first when the read would block.
func (r *relay) readFrame() ([]byte, error) {
	if r.c.Buffered() == 0 && r.cl.Pending() > 0 {
		// About to block on the server: let the client have what we have.
		if err := r.cl.Flush(); err != nil {
			return nil, errClient{err}
		}
	}
	f, err := r.c.ReadFrame()
	if err != nil {
		r.c.Broken = true
		return nil, errBackend{err}
	}
	return f, nil
}

// write passes a frame on as it came.
func (r *relay) write(f []byte) error {
	r.o.sent = true
	if r.s.capture.on {
		r.s.capture.frame(f)
	}
	if err := r.cl.WriteFrame(f); err != nil {
		return errClient{err}
	}
	return nil
}

// writeRewritten passes on p, a rewritten payload of the frame with
// sequence id seq.
func (r *relay) writeRewritten(seq uint8, p []byte) error {
	r.cl.Seq = seq
	r.o.sent = true
	if r.s.capture.on {
		r.s.capture.stripped(seq, p)
	}
	if err := r.cl.WritePacket(p); err != nil {
		return errClient{err}
	}
	return nil
}

// errFrame passes a server error on, or Vigil's own when a rule's
// timeout killed the statement. An error that closes the connection
// (backend.ClosesConnection) marks it broken: it is never reused.
func (r *relay) errFrame(f []byte) error {
	s := r.s
	r.o.err = r.c.NoteErr(mysqlproto.FramePayload(f))
	if !s.timeout.fired.Load() {
		return r.write(f)
	}
	r.o.err = s.timeoutError(r.c)
	r.o.sent = true
	r.cl.Seq = mysqlproto.FrameSeq(f)
	if err := r.cl.WritePacket(mysqlproto.AppendErr(s.scratch[:0], r.o.err)); err != nil {
		return errClient{err}
	}
	return nil
}

// okFrame handles an OK (or OK-style terminator) frame: session
// tracking, then passes it on, stripped for clients that did not ask
// for session tracking.
func (r *relay) okFrame(f []byte) error {
	s, c, o := r.s, r.c, &r.o
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
		if s.vars.sessionTrack {
			// Vigil's server connections track every variable and state
			// changes; the client sees only what it asked to track.
			if out, changed := mysqlproto.FilterSessionState(s.scratch[:0], p, ok, &s.vars.track); changed {
				s.scratch = out
				return r.writeRewritten(mysqlproto.FrameSeq(f), out)
			}
		}
	}
	if s.vars.sessionTrack || !ok.Tail {
		return r.write(f)
	}
	s.scratch = mysqlproto.StripSessionState(s.scratch[:0], p, ok)
	return r.writeRewritten(mysqlproto.FrameSeq(f), s.scratch)
}

// copyN passes n frames on (column or parameter definitions).
func (r *relay) copyN(n uint64) error {
	for range n {
		f, err := r.readFrame()
		if err != nil {
			return err
		}
		if err := r.write(f); err != nil {
			return err
		}
	}
	return nil
}

// rows passes rows on until the terminator and reports whether no result
// set follows.
func (r *relay) rows() (done bool, err error) {
	cont := false
	for {
		f, err := r.readFrame()
		if err != nil {
			return true, err
		}
		p := mysqlproto.FramePayload(f)
		if cont {
			cont = len(p) == mysqlproto.MaxPayload
			if err := r.write(f); err != nil {
				return true, err
			}
			continue
		}
		switch {
		case mysqlproto.IsErrPacket(p):
			return true, r.errFrame(f)
		case mysqlproto.IsRowsEnd(p, r.deprecateEOF):
			if r.deprecateEOF {
				if err := r.okFrame(f); err != nil {
					return true, err
				}
			} else {
				e := mysqlproto.ParseEOF(p)
				r.o.status, r.o.warnings = e.Status, e.Warnings
				if err := r.write(f); err != nil {
					return true, err
				}
			}
			return r.o.status&mysqlproto.ServerMoreResultsExists == 0, nil
		default:
			r.o.rows++
			r.o.setRows++
			cont = len(p) == mysqlproto.MaxPayload
			if err := r.write(f); err != nil {
				return true, err
			}
		}
	}
}

// cursorOpen: the server holds the rows back for COM_STMT_FETCH. Only
// when the execute asked for a cursor: MariaDB also sets the flag on
// result sets of a CALL whose procedure opened a cursor, and sends the
// rows.
func (r *relay) cursorOpen(kind respKind) bool {
	return kind == respExecute && r.s.cursorReq && r.o.status&mysqlproto.ServerStatusCursorExists != 0
}

// fieldList passes a COM_FIELD_LIST reply on: column definitions, then a
// terminator.
func (r *relay) fieldList() error {
	for {
		f, err := r.readFrame()
		if err != nil {
			return err
		}
		p := mysqlproto.FramePayload(f)
		if mysqlproto.IsErrPacket(p) {
			return r.errFrame(f)
		}
		if mysqlproto.IsEOF(p) {
			r.o.status = mysqlproto.ParseEOF(p).Status
			return r.write(f)
		}
		if mysqlproto.IsEOFHeader(p) && r.deprecateEOF {
			return r.okFrame(f)
		}
		if err := r.write(f); err != nil {
			return err
		}
	}
}

// replies passes on the reply to a query, an execute or a simple
// command: OKs, an error, LOCAL INFILE requests and result sets, until
// the last of them.
func (r *relay) replies(kind respKind) error {
	c := r.c
	for {
		f, err := r.readFrame()
		if err != nil {
			return err
		}
		p := mysqlproto.FramePayload(f)
		h, good := mysqlproto.Header(p)
		if !good {
			c.Broken = true
			return errBackend{fmt.Errorf("%w: empty reply", mysqlproto.ErrMalformed)}
		}
		switch h {
		case mysqlproto.OKPacket:
			if err := r.okFrame(f); err != nil {
				return err
			}
			if kind == respSimple || r.o.status&mysqlproto.ServerMoreResultsExists == 0 {
				return nil
			}
			continue
		case mysqlproto.ErrPacket:
			return r.errFrame(f)
		case mysqlproto.EOFPacket:
			if kind == respSimple {
				// COM_SET_OPTION and friends answer with EOF.
				r.o.status = mysqlproto.ParseEOF(p).Status
				return r.write(f)
			}
		case mysqlproto.LocalInfilePacket:
			// LOAD DATA LOCAL, as a query or as a prepared statement.
			if kind == respQuery || kind == respExecute {
				if err := r.s.localInfile(c, f); err != nil {
					return err
				}
				continue
			}
		}
		if kind == respSimple {
			c.Broken = true
			return errBackend{fmt.Errorf("%w: unexpected reply 0x%02x", mysqlproto.ErrMalformed, h)}
		}
		if done, err := r.resultSet(kind, f, p); err != nil || done {
			return err
		}
	}
}

// resultSet passes on a result set whose first frame (the column count)
// is f with payload p: column definitions, [EOF], rows, terminator. It
// reports whether the reply ends with it.
func (r *relay) resultSet(kind respKind, f, p []byte) (done bool, err error) {
	o := &r.o
	o.resultSet, o.setRows, o.insertID = true, 0, 0
	ncols, good := mysqlproto.ParseColumnCount(p)
	if !good {
		r.c.Broken = true
		return true, errBackend{fmt.Errorf("%w: column count", mysqlproto.ErrMalformed)}
	}
	if err := r.write(f); err != nil {
		return true, err
	}
	if err := r.copyN(ncols); err != nil {
		return true, err
	}
	if !r.deprecateEOF {
		f, err := r.readFrame()
		if err != nil {
			return true, err
		}
		o.status = mysqlproto.ParseEOF(mysqlproto.FramePayload(f)).Status
		if err := r.write(f); err != nil {
			return true, err
		}
		if r.cursorOpen(kind) {
			o.cursor = true
			return true, nil
		}
	}
	done, err = r.rows()
	if err != nil || done || o.err != nil {
		if r.cursorOpen(kind) {
			o.cursor = true
		}
		return true, err
	}
	return false, nil
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
