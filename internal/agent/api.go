package agent

import (
	"fmt"
	"time"
)

// The agent's HTTP API. Every path is fixed; nothing in a request names a
// program, a path or a command.
const (
	PathStatus  = "/v1/status"          // GET: Status
	PathStop    = "/v1/server/stop"     // POST: stop the server (configured command)
	PathStart   = "/v1/server/start"    // POST: start the server (configured command)
	PathBackup  = "/v1/backup"          // POST ?rate=B/s: an xbstream body, outcome in trailers
	PathRestore = "/v1/restore"         // POST ?expected_size=B, xbstream body: RestoreResult
	PathCleanup = "/v1/cleanup"         // POST: delete datadirs set aside by earlier restores
	TrailerOK   = "Vigil-Backup-Status" // "ok" only when mariadb-backup exited 0
	TrailerErr  = "Vigil-Backup-Error"  // why not, when not

	// PathTicket (POST ?rate=B/s): a one-time ticket that lets another
	// agent pull one backup of this one (TicketResult). Vigil asks the
	// donor's agent for it and hands it to the target's agent, which
	// then restores with ?from=DONOR_AGENT and the ticket in
	// HeaderTicket: the stream goes from agent to agent, not through
	// Vigil.
	PathTicket = "/v1/backup/ticket"
	// PathProgress (GET): the running restore's RestoreProgress, null
	// when none runs; cheap enough to poll (no datadir walk, no login).
	PathProgress = "/v1/restore/progress"
	HeaderTicket = "Vigil-Backup-Ticket"
)

// TicketResult is what POST /v1/backup/ticket answers.
type TicketResult struct {
	Ticket  string    `json:"ticket"`
	Expires time.Time `json:"expires"`
}

// Status is what GET /v1/status answers.
type Status struct {
	// Running: the server answers, or its pid file names a live process.
	Running bool `json:"running"`
	// Answering: the agent could log in to it.
	Answering bool   `json:"answering"`
	PID       int    `json:"pid,omitempty"`
	Version   string `json:"version,omitempty"`
	// ReadOnly and Replica are known only when Answering.
	ReadOnly bool `json:"read_only"`
	Replica  bool `json:"replica"`
	Galera   bool `json:"galera"`
	// Datadir, its size and the file system's free and total bytes.
	Datadir      string `json:"datadir"`
	DatadirBytes int64  `json:"datadir_bytes"`
	FreeBytes    int64  `json:"free_bytes"`
	TotalBytes   int64  `json:"total_bytes"`
	// CopyBytes is the room a restored copy of this datadir needs: the
	// datadir without its binary and relay logs and its temporary
	// tablespace, which a restored server starts empty. StreamBytes is
	// about what a backup of it streams: CopyBytes without the InnoDB
	// redo log too (a backup carries only what is logged while it runs).
	// Both 0 from an agent that does not know them.
	CopyBytes   int64 `json:"copy_bytes,omitempty"`
	StreamBytes int64 `json:"stream_bytes,omitempty"`
	// MariadbBackup and Mbstream are the tools' paths, "" when missing.
	MariadbBackup string `json:"mariadb_backup,omitempty"`
	Mbstream      string `json:"mbstream,omitempty"`
	// SalvageHold: the hold file exists, restore refuses.
	SalvageHold bool `json:"salvage_hold"`
	// Busy names the mutating operation running now, "" when none.
	Busy string `json:"busy,omitempty"`
	// OldDatadirs were set aside by restores and wait for cleanup.
	OldDatadirs []string `json:"old_datadirs,omitempty"`
	// Leftovers are directories an interrupted restore left
	// (.vigil-new-*) or a restored datadir that did not start
	// (.vigil-failed-*); cleanup removes them.
	Leftovers []string `json:"leftovers,omitempty"`
	// PeerPull: this agent can restore from another agent directly (its
	// certificate is valid for client authentication), and issues
	// tickets for its own backups. False from an older agent, or one
	// whose certificate is for servers only: Vigil then relays the
	// stream.
	PeerPull bool `json:"peer_pull,omitempty"`
	// Restore is the running restore's progress, nil when none runs.
	Restore *RestoreProgress `json:"restore,omitempty"`
	// Error says why something above is unknown (e.g. the login failed).
	Error string `json:"error,omitempty"`
}

// RestoreResult is what POST /v1/restore answers on success.
type RestoreResult struct {
	Datadir string `json:"datadir"`
	// OldDatadir is the previous datadir, kept until a cleanup.
	OldDatadir    string `json:"old_datadir"`
	BytesReceived int64  `json:"bytes_received"`
	// BinlogFile, BinlogPos and GTID come from the backup's
	// mariadb_backup_binlog_info (or xtrabackup_binlog_info): the donor's
	// position when the backup was consistent. GTID is what the restored
	// server's gtid_slave_pos must be set to.
	BinlogFile string `json:"binlog_file,omitempty"`
	BinlogPos  int64  `json:"binlog_pos,omitempty"`
	GTID       string `json:"gtid"`
	// SlaveInfo is mariadb_backup_slave_info verbatim when the donor was
	// a replica (--slave-info).
	SlaveInfo string `json:"slave_info,omitempty"`
	// Seconds per phase. StreamSeconds runs from the request's arrival
	// to the end of the extract: for a pull, opening the donor's stream
	// and its backup's start included.
	StreamSeconds  float64 `json:"stream_seconds,omitempty"`
	ExtractSeconds float64 `json:"extract_seconds"`
	PrepareSeconds float64 `json:"prepare_seconds"`
	SwapSeconds    float64 `json:"swap_seconds"`
}

// RestoreProgress is a running restore as its agent sees it.
type RestoreProgress struct {
	// Phase: receiving (the stream comes in), preparing, swapping.
	Phase string `json:"phase"`
	// Bytes received so far.
	Bytes int64 `json:"bytes"`
	// From is the donor agent a pull reads from, "" for a pushed stream.
	From string `json:"from,omitempty"`
}

// Restore phases (RestoreProgress.Phase).
const (
	RestoreReceiving = "receiving"
	RestorePreparing = "preparing"
	RestoreSwapping  = "swapping"
)

// CleanupResult lists the directories a cleanup deleted.
type CleanupResult struct {
	Removed []string `json:"removed"`
}

// Error codes of refusals and failures (the "code" of an error body).
const (
	CodeUnauthorized = "unauthorized"  // wrong or missing token
	CodeBusy         = "busy"          // another mutating operation runs
	CodeSalvageHold  = "salvage_hold"  // the salvage hold file exists
	CodeWritable     = "writable"      // the server answers with read_only=OFF
	CodeUnknownState = "unknown_state" // running but not answering: cannot prove read-only
	CodeNoSpace      = "no_space"      // not enough free space for expected_size
	CodeBadRequest   = "bad_request"
	CodeForbidden    = "forbidden"    // an agent's certificate asked for more than a ticketed backup
	CodeDonorFailed  = "donor_failed" // a pull: the donor's agent failed or cut the stream
	CodeNoPeer       = "no_peer"      // a pull: the donor's agent could not be reached or refused the pull (nothing streamed)
	CodeFailed       = "failed"       // the operation ran and failed
)

// Error is an agent's refusal or failure as the client sees it.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("agent: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}
