-- Run by the mysqltest wrapper as root on the primary before every test
-- file (compat/mtr). mariadb-test-run --extern neither checks nor restores
-- the server between tests, so a test that fails half-way would leave
-- tables, users or global variables that make the next tests fail too.
-- This puts back what the baseline (setup.sql) recorded: no databases but
-- the system ones, mtr and an empty test; no users but the baseline's;
-- every global variable at its baseline value.
-- A lock left by a session that is still running must not hang the run.
SET SESSION lock_wait_timeout = 5, @vigil_reset_failed = NULL;
DELIMITER //
BEGIN NOT ATOMIC
  DECLARE done INT DEFAULT 0;
  DECLARE s LONGTEXT CHARACTER SET utf8mb4;
  DECLARE c CURSOR FOR
    SELECT CONCAT('DROP DATABASE `', REPLACE(schema_name, '`', '``'), '`')
      FROM information_schema.schemata
      WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys', 'mtr')
    UNION ALL
    SELECT IF(JSON_VALUE(g.priv, '$.is_role') = 'true',
              CONCAT('DROP ROLE ', QUOTE(g.user)),
              CONCAT('DROP USER ', QUOTE(g.user), '@', QUOTE(g.host)))
      FROM mysql.global_priv g
      WHERE NOT EXISTS (SELECT 1 FROM mtr.vigil_baseline_users b WHERE b.user = g.user AND b.host = g.host)
    UNION ALL
    SELECT CONCAT('SET GLOBAL ', b.name, ' = ',
                  IF(b.value REGEXP '^-?[0-9]+(\\.[0-9]+)?$', b.value, QUOTE(b.value)))
      FROM mtr.vigil_baseline_globals b
      JOIN information_schema.global_variables g ON g.variable_name = b.name
      WHERE NOT (g.variable_value <=> b.value);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  OPEN c;
  l: LOOP
    FETCH c INTO s;
    IF done THEN
      LEAVE l;
    END IF;
    BEGIN
      -- Read-only variables are skipped; a DROP that fails (a lock a
      -- session still holds) is reported to the wrapper, which logs it.
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION
      BEGIN
        GET DIAGNOSTICS CONDITION 1 @vigil_reset_msg = MESSAGE_TEXT;
        IF s LIKE 'DROP %' THEN
          SET @vigil_reset_failed = CONCAT_WS('; ', @vigil_reset_failed, CONCAT(s, ': ', @vigil_reset_msg));
        END IF;
      END;
      EXECUTE IMMEDIATE s;
    END;
  END LOOP;
  CLOSE c;
END//
DELIMITER ;
CREATE DATABASE IF NOT EXISTS test CHARACTER SET latin1 COLLATE latin1_swedish_ci;
TRUNCATE TABLE mtr.test_suppressions;
-- The wrapper reads these three lines: what could not be dropped (NULL:
-- nothing), whether mtr's procedures survived the last test (a test that
-- damages mysql.proc loses them), and the position the replicas must reach
-- before the next test starts.
SELECT @vigil_reset_failed;
SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = 'mtr' AND routine_name = 'add_suppression';
SELECT @@gtid_binlog_pos;
