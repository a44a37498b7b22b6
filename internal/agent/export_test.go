package agent

// SyncBuffer lets the integration tests (package agent_test) collect
// audit lines with the same locked buffer as the unit tests.
type SyncBuffer = syncBuffer
