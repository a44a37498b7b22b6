package frontend

import (
	"testing"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

func TestDecideShard(t *testing.T) {
	m := &ShardMap{Clusters: []string{"c1", "c2"}, Schemas: map[string]string{"mapped": "c2", "dup": "c1"},
		States: map[string]ShardState{"ro": ShardReadOnly, "off": ShardOffline}}
	l := schemaLocator{m: m, seen: map[string][]string{
		"t1": {"c1"}, "t2": {"c2"}, "both": {"c1", "c2"}, "dup": {"c1", "c2"}, "ro": {"c1"}, "off": {"c2"},
	}}
	ref := func(names ...string) []shardRef {
		var out []shardRef
		for _, n := range names {
			out = append(out, shardRef{name: n, certain: true})
		}
		return out
	}
	cand := func(n string) shardRef { return shardRef{name: n} }
	for _, tc := range []struct {
		name    string
		st      shardStmt
		v       shardView
		cluster string
		code    uint16
		unknown string
	}{
		{"qualified", shardStmt{class: sqlscan.ClassRead, refs: ref("t2")}, shardView{schema: "t1"}, "c2", 0, ""},
		{"default schema", shardStmt{class: sqlscan.ClassRead}, shardView{schema: "t2"}, "c2", 0, ""},
		{"no schema at all", shardStmt{class: sqlscan.ClassRead}, shardView{}, "c1", 0, ""},
		{"previous cluster", shardStmt{class: sqlscan.ClassRead}, shardView{last: "c2"}, "c2", 0, ""},
		{"map over discovery", shardStmt{class: sqlscan.ClassRead, refs: ref("dup")}, shardView{}, "c1", 0, ""},
		{"mapped", shardStmt{class: sqlscan.ClassWrite, refs: ref("mapped")}, shardView{}, "c2", 0, ""},
		{"system schema ignored", shardStmt{class: sqlscan.ClassRead, refs: ref("information_schema", "t2")}, shardView{schema: "t1"}, "c2", 0, ""},
		{"same schema twice", shardStmt{class: sqlscan.ClassRead, refs: ref("t2", "t2")}, shardView{}, "c2", 0, ""},
		{"alias candidate ignored", shardStmt{class: sqlscan.ClassRead, refs: []shardRef{cand("x"), {name: "t2", certain: true}}}, shardView{}, "c2", 0, ""},
		{"two clusters", shardStmt{class: sqlscan.ClassRead, refs: ref("t1", "t2")}, shardView{}, "", mysqlproto.ERVigilShardCrossCluster, ""},
		{"ambiguous", shardStmt{class: sqlscan.ClassRead, refs: ref("both")}, shardView{}, "", mysqlproto.ERVigilShardAmbiguous, ""},
		{"ambiguous candidate too", shardStmt{class: sqlscan.ClassRead, refs: []shardRef{cand("both")}}, shardView{}, "", mysqlproto.ERVigilShardAmbiguous, ""},
		{"unknown schema", shardStmt{class: sqlscan.ClassWrite, refs: ref("nowhere")}, shardView{schema: "t2"}, "c2", 0, "nowhere"},
		{"use", shardStmt{class: sqlscan.ClassUse, use: "t2"}, shardView{schema: "t1"}, "c2", 0, ""},
		{"transaction elsewhere", shardStmt{class: sqlscan.ClassRead, refs: ref("t2")}, shardView{trx: "c1"}, "", mysqlproto.ERVigilShardCrossCluster, ""},
		{"transaction default schema elsewhere", shardStmt{class: sqlscan.ClassRead}, shardView{schema: "t2", trx: "c1"}, "", mysqlproto.ERVigilShardCrossCluster, ""},
		{"commit follows the transaction", shardStmt{class: sqlscan.ClassCommit}, shardView{schema: "t2", trx: "c1"}, "c1", 0, ""},
		{"set follows the previous", shardStmt{class: sqlscan.ClassSet}, shardView{schema: "t1", last: "c2"}, "c2", 0, ""},
		{"read_only refuses writes", shardStmt{class: sqlscan.ClassWrite, refs: ref("ro")}, shardView{}, "", mysqlproto.ERVigilShardReadOnly, ""},
		{"read_only reads", shardStmt{class: sqlscan.ClassRead, refs: ref("ro")}, shardView{}, "c1", 0, ""},
		{"read_only by default schema", shardStmt{class: sqlscan.ClassWrite}, shardView{schema: "ro"}, "", mysqlproto.ERVigilShardReadOnly, ""},
		{"offline", shardStmt{class: sqlscan.ClassRead, refs: ref("off")}, shardView{}, "", mysqlproto.ERVigilShardOffline, ""},
		{"overflow", shardStmt{class: sqlscan.ClassRead, refs: ref("t1"), overflow: true}, shardView{}, "", mysqlproto.ERVigilShardCrossCluster, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideShard(l, tc.st, tc.v)
			if tc.code != 0 {
				if d.err == nil || d.err.Code != tc.code {
					t.Fatalf("got %+v, want error %d", d, tc.code)
				}
				return
			}
			if d.err != nil || d.cluster != tc.cluster || d.unknown != tc.unknown {
				t.Fatalf("got cluster %q unknown %q err %v, want %q %q", d.cluster, d.unknown, d.err, tc.cluster, tc.unknown)
			}
		})
	}
}

func TestShardMapVersions(t *testing.T) {
	s := NewShardServer(nil)
	if !s.SetMap(&ShardMap{Version: 3}) || s.SetMap(&ShardMap{Version: 2}) || s.Map().Version != 3 {
		t.Fatalf("an older map replaced a newer one: version %d", s.Map().Version)
	}
}

func TestPreparedName(t *testing.T) {
	name, text, ok := preparedName([]byte("PREPARE `S1` FROM 'select * from t2.a'"), sqlscan.KwPrepare)
	if !ok || name != "s1" || string(text) != "select * from t2.a" {
		t.Fatalf("got %q %q %v", name, text, ok)
	}
	if name, _, ok := preparedName([]byte("deallocate prepare s1"), sqlscan.KwDeallocate); !ok || name != "s1" {
		t.Fatalf("deallocate: %q %v", name, ok)
	}
}
