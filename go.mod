module github.com/vigil-db/vigil

go 1.26

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/go-mysql-org/go-mysql v1.16.0 // indirect
	github.com/go-sql-driver/mysql v1.9.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/pingcap/errors v0.11.5-0.20260310054046-9c8b3586e4b2 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
)
