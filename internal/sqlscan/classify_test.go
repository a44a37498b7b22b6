package sqlscan

import "testing"

var classifyTests = []struct {
	q     string
	class Class
	flags Flags
}{
	// sysbench oltp_* statements
	{"SELECT c FROM sbtest1 WHERE id=?", ClassRead, 0},
	{"SELECT c FROM sbtest1 WHERE id=123", ClassRead, 0},
	{"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", ClassRead, 0},
	{"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100", ClassRead, 0},
	{"SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", ClassRead, 0},
	{"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", ClassRead, 0},
	{"UPDATE sbtest1 SET k=k+1 WHERE id=5", ClassWrite, 0},
	{"UPDATE sbtest1 SET c='0123-4567' WHERE id=5", ClassWrite, 0},
	{"DELETE FROM sbtest1 WHERE id=5", ClassWrite, 0},
	{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 4993, '0123', '4567')", ClassWrite, 0},
	{"BEGIN", ClassBegin, 0},
	{"COMMIT", ClassCommit, 0},

	// reads
	{"select 1", ClassRead, 0},
	{"SeLeCt 1", ClassRead, 0},
	{"  \n\t SELECT 1  ", ClassRead, 0},
	{"SELECT 1;", ClassRead, 0},
	{"SELECT 1; -- trailing comment", ClassRead, 0},
	{"SELECT 1;  ;; /* nothing */ ", ClassRead, 0},
	{"(SELECT 1) UNION (SELECT 2)", ClassRead, 0},
	{"((SELECT a FROM t))", ClassRead, 0},
	{"SHOW TABLES", ClassRead, 0},
	{"show master status", ClassRead, 0},
	{"SHOW SLAVE STATUS", ClassRead, 0},
	{"SHOW GLOBAL VARIABLES LIKE 'read_only'", ClassRead, 0},
	{"DESCRIBE t", ClassRead, 0},
	{"DESC t", ClassRead, 0},
	{"EXPLAIN SELECT * FROM t", ClassRead, 0},
	{"EXPLAIN UPDATE t SET a=1", ClassRead, 0},
	{"EXPLAIN FORMAT=JSON SELECT * FROM t", ClassRead, 0},
	{"EXPLAIN EXTENDED SELECT 1", ClassRead, 0},
	{"EXPLAIN FOR CONNECTION 12", ClassRead, 0},
	{"EXPLAIN ANALYZE SELECT * FROM t", ClassRead, FlagExplainAnalyze},
	{"EXPLAIN ANALYZE FORMAT=TREE SELECT * FROM t", ClassRead, FlagExplainAnalyze},
	{"EXPLAIN ANALYZE UPDATE t SET a=1", ClassWrite, FlagExplainAnalyze},
	{"ANALYZE SELECT * FROM t", ClassRead, FlagExplainAnalyze},
	{"EXPLAIN SELECT GET_LOCK('x', 1), @a := 1", ClassRead, 0},
	{"EXPLAIN ANALYZE SELECT GET_LOCK('x', 1)", ClassRead, FlagExplainAnalyze | FlagGetLock | FlagSideEffect},
	{"ANALYZE FORMAT=JSON SELECT * FROM t", ClassRead, FlagExplainAnalyze},
	{"ANALYZE DELETE FROM t WHERE a=1", ClassWrite, FlagExplainAnalyze},
	{"VALUES (1,2), (3,4)", ClassRead, 0},
	{"VALUES ROW(1,2), ROW(3,4)", ClassRead, 0},
	{"TABLE t", ClassRead, 0},
	{"HELP 'contents'", ClassRead, 0},
	{"WITH c AS (SELECT 1) SELECT * FROM c", ClassRead, 0},
	{"WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 5) SELECT * FROM c", ClassRead, 0},
	{"WITH a AS (SELECT 1), b AS (SELECT 2) SELECT * FROM a, b", ClassRead, 0},
	{"WITH c AS (SELECT 1) (SELECT * FROM c)", ClassRead, 0},
	{"WITH c AS (SELECT id FROM t) UPDATE t SET a=1 WHERE id IN (SELECT id FROM c)", ClassWrite, 0},
	{"WITH c AS (SELECT id FROM t) DELETE FROM t WHERE id IN (SELECT id FROM c)", ClassWrite, 0},
	{"WITH", ClassUnknown, 0},
	{"SELECT @@session.transaction_isolation", ClassRead, 0},
	{"SELECT @@tx_isolation, @@version", ClassRead, 0},
	{"SELECT @x", ClassRead, 0},
	{"SELECT SLEEP(1)", ClassRead, 0},
	{"SELECT my_stored_function(1)", ClassRead, FlagSideEffect},
	{"SELECT * FROM t WHERE a IN (1,2,3) AND b = 'x'", ClassRead, 0},
	{"SELECT * FROM t1 JOIN t2 ON t1.id = t2.id WHERE t1.a > -5", ClassRead, 0},
	{"XA RECOVER", ClassRead, FlagXA},

	// side effects and pins
	{"SELECT LAST_INSERT_ID()", ClassRead, FlagSideEffect | FlagLastInsertID},
	{"select last_insert_id ( )", ClassRead, FlagSideEffect | FlagLastInsertID},
	{"SELECT @@identity", ClassRead, FlagSideEffect | FlagLastInsertID},
	{"SELECT @@last_insert_id", ClassRead, FlagSideEffect | FlagLastInsertID},
	{"SELECT GET_LOCK('lock1', 10)", ClassRead, FlagGetLock | FlagSideEffect},
	{"SELECT RELEASE_LOCK('lock1')", ClassRead, FlagReleaseLock | FlagSideEffect},
	{"SELECT RELEASE_ALL_LOCKS()", ClassRead, FlagReleaseLock | FlagSideEffect},
	{"SELECT IS_USED_LOCK('l'), IS_FREE_LOCK('l')", ClassRead, FlagSideEffect},
	{"SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", ClassRead, FlagCalcFoundRows},
	{"SELECT FOUND_ROWS()", ClassRead, FlagFoundRows | FlagSideEffect},
	{"SELECT ROW_COUNT()", ClassRead, FlagSideEffect | FlagRowCount},
	{"SELECT NEXTVAL(s)", ClassRead, FlagSideEffect | FlagSequence},
	{"SELECT SETVAL(s, 100)", ClassRead, FlagSideEffect},
	{"SELECT LASTVAL(s)", ClassRead, FlagSideEffect},
	{"SELECT NEXT VALUE FOR s", ClassRead, FlagSideEffect | FlagSequence},
	{"SELECT PREVIOUS VALUE FOR s", ClassRead, FlagSideEffect},
	{"SELECT @x := 1", ClassRead, FlagUserVar | FlagSideEffect},
	{"SELECT @rownum := @rownum + 1 AS n FROM t", ClassRead, FlagUserVar | FlagSideEffect},
	{"SELECT a INTO @x FROM t LIMIT 1", ClassRead, FlagUserVar | FlagSideEffect},
	{"SELECT a FROM t LIMIT 1 INTO @x", ClassRead, FlagUserVar | FlagSideEffect},
	{"SELECT * FROM t INTO OUTFILE '/tmp/x'", ClassRead, FlagSideEffect},
	{"SELECT * FROM t INTO DUMPFILE '/tmp/x'", ClassRead, FlagSideEffect},
	{"SELECT * FROM t WHERE id = 1 FOR UPDATE", ClassRead, FlagForUpdate},
	{"SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT", ClassRead, FlagForUpdate},
	{"SELECT * FROM t WHERE id = 1 FOR SHARE SKIP LOCKED", ClassRead, FlagForUpdate},
	{"SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE", ClassRead, FlagForUpdate},
	{"SELECT * FROM t WHERE id = 1 lock in share mode", ClassRead, FlagForUpdate},
	{"SELECT MATCH (a) AGAINST ('x' IN BOOLEAN MODE) FROM t", ClassRead, 0},
	{"SELECT `get_lock`(1)", ClassRead, FlagSideEffect},
	{"SELECT 'GET_LOCK(' FROM t", ClassRead, 0},
	{"SELECT 1 -- GET_LOCK(\n", ClassRead, 0},
	{"SELECT /* GET_LOCK( */ 1", ClassRead, 0},
	{"SELECT /*! GET_LOCK('x', 1) */", ClassRead, FlagGetLock | FlagSideEffect},

	// writes
	{"insert into t values (1)", ClassWrite, 0},
	{"INSERT INTO t SELECT * FROM u", ClassWrite, 0},
	{"INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)", ClassWrite, 0},
	{"REPLACE INTO t VALUES (1)", ClassWrite, 0},
	{"UPDATE t SET a = 1", ClassWrite, 0},
	{"DELETE t FROM t JOIN u ON t.id = u.id", ClassWrite, 0},
	{"LOAD DATA INFILE '/tmp/x' INTO TABLE t", ClassWrite, 0},
	{"LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", ClassWrite, FlagLoadLocal},
	{"LOAD DATA LOW_PRIORITY LOCAL INFILE 'x' INTO TABLE t", ClassWrite, FlagLoadLocal},
	{"LOAD XML LOCAL INFILE 'x' INTO TABLE t", ClassWrite, FlagLoadLocal},
	{"CREATE TABLE t (id INT PRIMARY KEY)", ClassWrite, 0},
	{"CREATE TEMPORARY TABLE tmp (id INT)", ClassWrite, FlagTempTable},
	{"create temporary table if not exists tmp select * from t", ClassWrite, FlagTempTable},
	{"CREATE OR REPLACE TEMPORARY TABLE tmp (id INT)", ClassWrite, FlagTempTable},
	{"DROP TEMPORARY TABLE tmp", ClassWrite, FlagDropTemp},
	{"DROP TEMPORARY TABLE IF EXISTS tmp", ClassWrite, FlagDropTemp},
	{"DROP TABLE t", ClassWrite, 0},
	{"ALTER TABLE t ADD COLUMN b INT", ClassWrite, 0},
	{"TRUNCATE TABLE t", ClassWrite, 0},
	{"RENAME TABLE a TO b", ClassWrite, 0},
	{"GRANT SELECT ON db.* TO 'u'@'%'", ClassWrite, 0},
	{"REVOKE ALL ON *.* FROM 'u'@'%'", ClassWrite, 0},
	{"CALL p(1, @out)", ClassWrite, FlagCall},
	{"DO SLEEP(1)", ClassWrite, 0},
	{"DO GET_LOCK('x', 0)", ClassWrite, FlagGetLock | FlagSideEffect},
	{"HANDLER t OPEN", ClassWrite, FlagHandler},
	{"HANDLER db.t OPEN AS h", ClassWrite, FlagHandler},
	{"HANDLER t READ FIRST", ClassWrite, 0},
	{"HANDLER t CLOSE", ClassWrite, 0},
	{"SHOW WARNINGS", ClassRead, FlagDiagnostics},
	{"show warnings limit 2", ClassRead, FlagDiagnostics},
	{"SHOW ERRORS", ClassRead, FlagDiagnostics},
	{"SHOW COUNT(*) WARNINGS", ClassRead, FlagDiagnostics},
	{"SHOW COUNT ( * ) ERRORS", ClassRead, FlagDiagnostics},
	{"SELECT @@warning_count", ClassRead, FlagDiagnostics},
	{"SELECT @@session.error_count, 1", ClassRead, FlagDiagnostics},
	{"GET CURRENT DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT", ClassSession, FlagDiagnostics | FlagUserVar},
	{"SHOW STATUS LIKE 'Com_select'", ClassRead, FlagSessionStatus},
	{"SHOW SESSION STATUS", ClassRead, FlagSessionStatus},
	{"SHOW LOCAL STATUS", ClassRead, FlagSessionStatus},
	{"SHOW GLOBAL STATUS", ClassRead, 0},
	{"SHOW MASTER STATUS", ClassRead, 0},
	{"SHOW ENGINE INNODB STATUS", ClassRead, 0},
	{"SHOW PROFILES", ClassRead, FlagSessionStatus},
	{"SHOW PROFILE CPU FOR QUERY 2", ClassRead, FlagSessionStatus},
	{"SELECT * FROM information_schema.SESSION_STATUS", ClassRead, FlagSessionStatus},
	{"select variable_value from information_schema.session_variables where variable_name='x'", ClassRead, FlagSessionStatus},
	{"FLUSH STATUS", ClassWrite, FlagSessionStatus},
	{"FLUSH LOCAL STATUS", ClassWrite, FlagSessionStatus},
	{"SELECT CONNECTION_ID()", ClassRead, FlagConnectionID},
	{"SET profiling = 1", ClassSet, FlagSessionStatus},
	{"SELECT f1()", ClassRead, FlagSideEffect},
	{"SHOW FULL PROCESSLIST", ClassRead, FlagSideEffect},
	{"SELECT id FROM information_schema.processlist WHERE state = 'x'", ClassRead, FlagSideEffect},
	{"SELECT @@pseudo_thread_id", ClassRead, FlagConnectionID},
	{"SET pseudo_thread_id = 5", ClassSet, 0},
	{"SELECT db.f1(a) FROM t", ClassRead, FlagSideEffect},
	{"SELECT `f1` (2)", ClassRead, FlagSideEffect},
	{"SELECT JSON_EXTRACT(j, '$.a'), ST_X(p), date_format(d, '%Y'), CAST(x AS DECIMAL(10,2)) FROM t", ClassRead, 0},
	{"SELECT a FROM t WHERE b IN (1, 2) AND MATCH (c) AGAINST ('x')", ClassRead, 0},
	{"WITH c1 (n) AS (SELECT 1) SELECT * FROM c1", ClassRead, 0},
	{"SET @@session.session_track_system_variables = 'autocommit'", ClassSet, FlagSessionTrack},
	{"SET session_track_schema = OFF, session_track_state_change = ON", ClassSet, FlagSessionTrack},
	{"SET GLOBAL session_track_system_variables = '*'", ClassSet, FlagGlobalSet},
	{"SET session_track_transaction_info = STATE", ClassSet, 0},
	{"SET GLOBAL profiling_history_size = 10", ClassSet, FlagGlobalSet},
	{"SELECT LASTVAL(s)", ClassRead, FlagSideEffect},
	{"SELECT PREVIOUS VALUE FOR s", ClassRead, FlagSideEffect},
	{"SET DEFAULT ROLE r FOR u", ClassWrite, 0},
	{"OPTIMIZE TABLE t", ClassWrite, 0},
	{"ANALYZE TABLE t", ClassWrite, 0},
	{"ANALYZE NO_WRITE_TO_BINLOG TABLE t", ClassWrite, 0},
	{"ANALYZE LOCAL TABLE t", ClassWrite, 0},
	{"REPAIR TABLE t", ClassWrite, 0},
	{"CHECK TABLE t", ClassWrite, 0},
	{"FLUSH PRIVILEGES", ClassWrite, 0},
	{"FLUSH TABLES WITH READ LOCK", ClassWrite, FlagLockTables},
	{"FLUSH TABLES t1, t2 WITH READ LOCK", ClassWrite, FlagLockTables},
	{"FLUSH TABLES t1 FOR EXPORT", ClassWrite, FlagLockTables},
	{"START SLAVE", ClassWrite, 0},
	{"STOP REPLICA", ClassWrite, 0},
	{"CHANGE MASTER TO MASTER_HOST='h'", ClassWrite, 0},
	{"RESET MASTER", ClassWrite, 0},
	{"PURGE BINARY LOGS TO 'mysql-bin.000010'", ClassWrite, 0},
	{"CREATE USER 'u'@'%' IDENTIFIED BY 'p'", ClassWrite, 0},
	{"CREATE VIEW v AS SELECT GET_LOCK('x', 1)", ClassWrite, 0},
	{"CREATE DEFINER=`root`@`localhost` PROCEDURE p() BEGIN SELECT 1; SET @x = 1; END", ClassWrite, 0},
	{"CREATE PROCEDURE p() BEGIN DECLARE x INT; SET autocommit=0; SELECT CASE WHEN 1 THEN 2 END; IF x THEN SELECT 1; END IF; END", ClassWrite, 0},
	{"CREATE TRIGGER tr BEFORE UPDATE ON t FOR EACH ROW BEGIN SET NEW.a = 1; END", ClassWrite, 0},
	{"CREATE TRIGGER tr BEFORE UPDATE ON t FOR EACH ROW SET NEW.a = 1; SELECT 1", ClassWrite, FlagMulti},
	{"CREATE FUNCTION f() RETURNS INT RETURN 1", ClassWrite, 0},
	{"CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO BEGIN DELETE FROM t; END", ClassWrite, 0},
	{"BEGIN NOT ATOMIC SELECT 1; SELECT 2; END", ClassWrite, 0},
	{"BEGIN NOT ATOMIC SET @x = 1; END", ClassWrite, FlagUserVar},
	{"BEGIN NOT ATOMIC DECLARE x INT; SET autocommit = 0; END; SELECT 1", ClassWrite, FlagAutocommitOff | FlagMulti},
	{"IF @x THEN SELECT 1; END IF", ClassWrite, FlagMulti},

	// transactions
	{"begin", ClassBegin, 0},
	{"BEGIN WORK", ClassBegin, 0},
	{"BEGIN;", ClassBegin, 0},
	{"START TRANSACTION", ClassBegin, 0},
	{"START TRANSACTION READ WRITE", ClassBegin, 0},
	{"START TRANSACTION WITH CONSISTENT SNAPSHOT", ClassBegin, 0},
	{"START TRANSACTION READ ONLY", ClassBeginReadOnly, FlagReadOnlyTrx},
	{"start transaction with consistent snapshot, read only", ClassBeginReadOnly, FlagReadOnlyTrx},
	{"COMMIT WORK", ClassCommit, 0},
	{"commit;", ClassCommit, 0},
	{"COMMIT AND CHAIN", ClassCommit, FlagChain},
	{"COMMIT AND NO CHAIN NO RELEASE", ClassCommit, 0},
	{"COMMIT RELEASE", ClassCommit, FlagRelease},
	{"ROLLBACK", ClassRollback, 0},
	{"ROLLBACK WORK", ClassRollback, 0},
	{"ROLLBACK AND CHAIN", ClassRollback, FlagChain},
	{"ROLLBACK TO SAVEPOINT s1", ClassSavepoint, 0},
	{"ROLLBACK TO s1", ClassSavepoint, 0},
	{"ROLLBACK WORK TO SAVEPOINT s1", ClassSavepoint, 0},
	{"SAVEPOINT s1", ClassSavepoint, 0},
	{"RELEASE SAVEPOINT s1", ClassSavepoint, 0},
	{"XA START 'x'", ClassBegin, FlagXA},
	{"XA BEGIN 'x'", ClassBegin, FlagXA},
	{"XA END 'x'", ClassSession, FlagXA},
	{"XA PREPARE 'x'", ClassSession, FlagXA},
	{"XA COMMIT 'x'", ClassCommit, FlagXA},
	{"XA COMMIT 'x' ONE PHASE", ClassCommit, FlagXA},
	{"XA ROLLBACK 'x'", ClassRollback, FlagXA},

	// SET
	{"SET autocommit=0", ClassSet, FlagAutocommitOff},
	{"set autocommit = 1", ClassSet, FlagAutocommitOn},
	{"SET AUTOCOMMIT=OFF", ClassSet, FlagAutocommitOff},
	{"SET autocommit=on", ClassSet, FlagAutocommitOn},
	{"SET autocommit = FALSE", ClassSet, FlagAutocommitOff},
	{"SET autocommit = true", ClassSet, FlagAutocommitOn},
	{"SET autocommit = 'OFF'", ClassSet, FlagAutocommitOff},
	{"SET @@autocommit=0", ClassSet, FlagAutocommitOff},
	{"SET @@session.autocommit = 0", ClassSet, FlagAutocommitOff},
	{"SET @@SESSION.AUTOCOMMIT = 1", ClassSet, FlagAutocommitOn},
	{"SET SESSION autocommit=0", ClassSet, FlagAutocommitOff},
	{"SET LOCAL autocommit=0", ClassSet, FlagAutocommitOff},
	{"SET `autocommit` = 0", ClassSet, FlagAutocommitOff},
	{"SET autocommit := 0", ClassSet, FlagAutocommitOff},
	{"SET autocommit = @x", ClassSet, 0},
	{"SET autocommit = 1 - 1", ClassSet, 0},
	{"SET autocommit = (0)", ClassSet, 0},
	{"SET @a = (1, 2), autocommit = 0", ClassSet, FlagUserVar | FlagAutocommitOff},
	{"SET autocommit = 0,", ClassSet, FlagAutocommitOff},
	{"SET autocommit =", ClassSet, 0},
	{"SET GLOBAL autocommit=0", ClassSet, FlagGlobalSet},
	{"SET @@global.autocommit=0", ClassSet, FlagGlobalSet},
	{"SET names utf8mb4, autocommit=0", ClassSet, FlagAutocommitOff},
	{"SET CHARACTER SET utf8, @x = 1", ClassSet, FlagUserVar},
	{"SET NAMES DEFAULT", ClassSet, 0},
	{"SET sql_mode='STRICT_TRANS_TABLES', autocommit=0", ClassSet, FlagAutocommitOff},
	{"SET sql_mode = CONCAT(@@sql_mode, ',ANSI'), autocommit = 0", ClassSet, FlagAutocommitOff},
	{"SET autocommit=0, autocommit=1", ClassSet, FlagAutocommitOn},
	{"SET GLOBAL max_connections=10, SESSION autocommit=0", ClassSet, FlagGlobalSet | FlagAutocommitOff},
	{"SET GLOBAL max_connections=10, autocommit=0", ClassSet, FlagGlobalSet},
	{"SET GLOBAL max_connections=10, @@autocommit=0", ClassSet, FlagGlobalSet | FlagAutocommitOff},
	{"SET PERSIST max_connections=10", ClassSet, FlagGlobalSet},
	{"SET @@persist_only.max_connections=10", ClassSet, FlagGlobalSet},
	{"SET sql_log_bin=0", ClassSet, FlagSqlLogBinOff},
	{"SET SESSION sql_log_bin = OFF", ClassSet, FlagSqlLogBinOff},
	{"SET sql_log_bin=1", ClassSet, 0},
	{"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", ClassSet, 0},
	{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", ClassSet, 0},
	{"SET TRANSACTION READ ONLY", ClassSet, 0},
	{"SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED", ClassSet, FlagGlobalSet},
	{"SET @@session.transaction_isolation = 'READ-COMMITTED'", ClassSet, 0},
	{"SET NAMES utf8mb4", ClassSet, 0},
	{"SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'", ClassSet, 0},
	{"SET CHARACTER SET utf8", ClassSet, 0},
	{"SET CHARSET utf8", ClassSet, 0},
	{"SET @x = 1", ClassSet, FlagUserVar},
	{"SET @x := 1", ClassSet, FlagUserVar},
	{"SET @x = 1, @y = 2", ClassSet, FlagUserVar},
	{"SET @`x y` = 1", ClassSet, FlagUserVar},
	{"SET @x = (SELECT GET_LOCK('a', 1))", ClassSet, FlagUserVar | FlagGetLock},
	{"SET sql_mode = ''", ClassSet, 0},
	{"SET max_execution_time = 1000", ClassSet, 0},
	{"SET PASSWORD = 'x'", ClassWrite, 0},
	{"SET PASSWORD FOR 'u'@'%' = 'x'", ClassWrite, 0},
	{"SET ROLE ALL", ClassWrite, FlagRole},
	{"SET DEFAULT ROLE r TO u", ClassWrite, 0},
	{"SET STATEMENT max_statement_time=10 FOR SELECT * FROM t", ClassRead, 0},
	{"SET STATEMENT max_statement_time=10 FOR UPDATE t SET a = 1", ClassWrite, 0},
	{"SET STATEMENT a=1, b=2 FOR SELECT * FROM t FOR UPDATE", ClassRead, FlagForUpdate},
	{"SET STATEMENT sql_mode='' FOR INSERT INTO t VALUES (1)", ClassWrite, 0},

	// session statements
	{"USE db", ClassUse, 0},
	{"use `my db`", ClassUse, 0},
	{"LOCK TABLES t READ", ClassSession, FlagLockTables},
	{"LOCK TABLE t WRITE, u READ", ClassSession, FlagLockTables},
	{"LOCK INSTANCE FOR BACKUP", ClassSession, FlagLockTables},
	{"UNLOCK TABLES", ClassSession, FlagUnlockTables},
	{"UNLOCK TABLE", ClassSession, FlagUnlockTables},
	{"BACKUP LOCK t", ClassSession, FlagLockTables},
	{"BACKUP UNLOCK", ClassSession, FlagUnlockTables},
	{"PREPARE s FROM 'SELECT ?'", ClassSession, FlagPrepare},
	{"EXECUTE s USING @a", ClassSession, 0},
	{"DEALLOCATE PREPARE s", ClassSession, FlagDeallocate},
	{"DROP PREPARE s", ClassSession, FlagDeallocate},
	{"KILL 5", ClassSession, FlagKill},
	{"KILL QUERY 5", ClassSession, FlagKill},
	{"KILL CONNECTION 5", ClassSession, FlagKill},
	{"SHUTDOWN", ClassSession, 0},
	{"GET DIAGNOSTICS @n = NUMBER", ClassSession, FlagDiagnostics | FlagUserVar},

	// ORM and driver patterns
	{"/* mysql-connector-java-8.0.33 */SELECT  @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS character_set_client", ClassRead, 0},
	{"SELECT @@session.transaction_read_only", ClassRead, 0},
	{"SET SQL_AUTO_IS_NULL = 0", ClassSet, 0},
	{"SET @@SESSION.sql_mode = CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO'), @@SESSION.sql_auto_is_null = 0, @@SESSION.wait_timeout = 2147483", ClassSet, 0},
	{"SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci, @@SESSION.autocommit = 0", ClassSet, FlagAutocommitOff},
	{"SET character_set_results = NULL", ClassSet, 0},
	{"SELECT `users`.* FROM `users` WHERE `users`.`id` = 1 LIMIT 1", ClassRead, 0},
	{"INSERT INTO `users` (`name`, `created_at`) VALUES ('a', '2024-01-01 00:00:00')", ClassWrite, 0},
	{"SELECT LAST_INSERT_ID() AS id", ClassRead, FlagSideEffect | FlagLastInsertID},
	{"SELECT 1", ClassRead, 0},

	// comments in odd places
	{"SELECT/*x*/c/*y*/FROM/**/t", ClassRead, 0},
	{"UPDATE/* c */t SET a=1", ClassWrite, 0},
	{"BEGIN /* c */ WORK -- d", ClassBegin, 0},
	{"START /* c */ TRANSACTION /* d */ READ /* e */ ONLY", ClassBeginReadOnly, FlagReadOnlyTrx},
	{"COMMIT -- x", ClassCommit, 0},
	{"SET /* c */ autocommit /* d */ = /* e */ 0 # f", ClassSet, FlagAutocommitOff},
	{"SELECT * FROM t WHERE id = 1 FOR /* c */ UPDATE", ClassRead, FlagForUpdate},
	{"SELECT 1 # FOR UPDATE", ClassRead, 0},
	{"SELECT 1 -- FOR UPDATE", ClassRead, 0},
	{"SELECT 1 --\n FOR UPDATE", ClassRead, FlagForUpdate},
	{"SELECT 1 --x FOR UPDATE", ClassRead, FlagForUpdate},
	{"SELECT GET_LOCK/* c */('x', 1)", ClassRead, FlagGetLock | FlagSideEffect},

	// comments, executable comments, case
	{"/* leading */ SELECT 1", ClassRead, 0},
	{"-- leading\nSELECT 1", ClassRead, 0},
	{"# leading\nUPDATE t SET a=1", ClassWrite, 0},
	{"/*+ MAX_EXECUTION_TIME(1000) */ SELECT 1", ClassRead, 0},
	{"SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM t", ClassRead, 0},
	{"/*!40101 SET NAMES utf8 */", ClassSet, 0},
	{"/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */", ClassSet, FlagUserVar},
	{"/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001 VIEW `v` AS select 1 */", ClassWrite, 0},
	{"/*M!100101 SET STATEMENT max_statement_time=1 FOR */ SELECT 1", ClassRead, 0},
	{"/*!*/ SELECT 1", ClassRead, 0},
	{"/* SELECT */ DELETE FROM t", ClassWrite, 0},
	{"/* unterminated comment SELECT 1", ClassUnknown, 0},
	{"SELECT 'unterminated", ClassRead, 0},
	{"sElEcT 1 fOr UpDaTe", ClassRead, FlagForUpdate},
	{"(  /* c */ ( SELECT 1 ) )", ClassRead, 0},

	// multi-statements
	{"SELECT 1; SELECT 2", ClassRead, FlagMulti},
	{"SELECT 1; DELETE FROM t", ClassRead, FlagMulti},
	{"BEGIN; UPDATE t SET a=1; COMMIT", ClassBegin, FlagMulti},
	{"SELECT 1; SET @x = 1", ClassRead, FlagMulti | FlagUserVar},
	{"SET autocommit=0; SELECT 1", ClassSet, FlagMulti | FlagAutocommitOff},
	{"SET autocommit=0; SET autocommit=1", ClassSet, FlagMulti | FlagAutocommitOn},
	{"SELECT 1; SELECT GET_LOCK('x', 1)", ClassRead, FlagMulti | FlagGetLock | FlagSideEffect},
	{"SELECT 1 ; /* c */ -- d\n ;", ClassRead, 0},
	{"SELECT ';'; SELECT 2", ClassRead, FlagMulti},

	// not understood
	{"", ClassUnknown, 0},
	{"   ", ClassUnknown, 0},
	{";", ClassUnknown, 0},
	{"/* only a comment */", ClassUnknown, 0},
	{"FOO BAR", ClassUnknown, 0},
	{"`select` 1", ClassUnknown, 0},
	{"123", ClassUnknown, 0},
}

func TestClassify(t *testing.T) {
	for _, tt := range classifyTests {
		got := Scan([]byte(tt.q))
		if got.Class != tt.class || got.Flags != tt.flags {
			t.Errorf("Scan(%q) = %v %v, want %v %v", tt.q, got.Class, got.Flags, tt.class, tt.flags)
		}
	}
}

func TestEmptyDigest(t *testing.T) {
	for _, q := range []string{"", "  ", ";", " ; ;", "/* c */", "-- c", "# c\n", "/*! */"} {
		if d := Scan([]byte(q)).Digest; d != 0 {
			t.Errorf("Scan(%q).Digest = %x, want 0", q, d)
		}
	}
	if d := Scan([]byte("SELECT 1")).Digest; d == 0 {
		t.Error("digest of a statement is 0")
	}
}

func TestFirst(t *testing.T) {
	tests := []struct {
		q    string
		want string
	}{
		{"select 1", "SELECT"},
		{"  /* c */ (SELECT 1)", "SELECT"},
		{"/*!40101 set names utf8 */", "SET"},
		{"insert into t values (1)", "INSERT"},
		{"sbtest1", ""},
		{"", ""},
		{"'x'", ""},
	}
	for _, tt := range tests {
		if got := Scan([]byte(tt.q)).First.String(); got != tt.want {
			t.Errorf("Scan(%q).First = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestClassAndFlagsString(t *testing.T) {
	if got := ClassBeginReadOnly.String(); got != "begin-read-only" {
		t.Errorf("ClassBeginReadOnly.String() = %q", got)
	}
	if got := (FlagMulti | FlagGetLock | FlagRelease).String(); got != "multi|get-lock|release" {
		t.Errorf("Flags.String() = %q", got)
	}
	if got := Flags(0).String(); got != "0" {
		t.Errorf("Flags(0).String() = %q", got)
	}
	for i := 0; i < len(flagNames); i++ {
		if Flags(1<<i).String() == "unknown" {
			t.Errorf("flag %d has no name", i)
		}
	}
	if FlagCall != 1<<(len(flagNames)-1) {
		t.Errorf("flagNames has %d names; the last flag is %d", len(flagNames), FlagCall)
	}
	for c := ClassUnknown; c <= ClassSession; c++ {
		if c.String() == "" || c.String() == "class?" {
			t.Errorf("class %d has no name", c)
		}
	}
}
