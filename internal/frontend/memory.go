package frontend

import (
	"fmt"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// curTextMax bounds the copy of the running statement that session
// listings show (masked): a 64 MiB statement is not copied whole.
const curTextMax = 64 << 10

// keepBuf is the largest per-session scratch buffer (rewritten
// statements, SET rewrites, cache keys, a COM_STMT_EXECUTE re-sent with
// its parameter types) kept between statements.
const keepBuf = 64 << 10

// dropLarge gives back what a large statement left in the session once
// its command is done: the client connection's assembly buffer (and its
// share of security.statement_memory) and scratch buffers grown for it.
func (s *Session) dropLarge() {
	s.client.ReleaseBig()
	for _, b := range []*[]byte{&s.rewriteBuf, &s.vars.setBuf, &s.cacheKeyBuf, &s.scratch} {
		if cap(*b) > keepBuf {
			*b = nil
		}
	}
}

// refuseForMemory answers a statement that got no statement memory
// within the wait (its bytes were read and dropped), as a server answers
// when it runs out of memory: 1041 ER_OUT_OF_RESOURCES.
func (s *Session) refuseForMemory() {
	limit := int64(0)
	if b := s.srv.budget.Load(); b != nil {
		limit = b.Limit()
	}
	se := mysqlproto.NewError(mysqlproto.EROutOfResources, "HY000",
		"Vigil: out of statement memory: the large statements of all clients together may hold %s (security.statement_memory) and this one waited %s for its share; retry, send smaller statements, or raise the limit",
		sizeText(limit), mysqlproto.DefaultBudgetWait)
	// Not sendError: the reply follows the statement's last frame (a
	// statement over 16 MiB came in several), as a server's would. Its
	// query-log record has no text: the bytes were dropped unread.
	s.result.begin()
	run := stmtRun{start: time.Now()}
	_ = s.refuse(se)
	s.logStmt(s.srv.proc.Load(), &run, time.Now())
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
