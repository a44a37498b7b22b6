-- Run by compat/mtr once on the primary after mtr's own mtr database
-- (include/mtr_warnings.sql, include/mtr_check.sql) is installed: records
-- the users and global variables reset.sql puts back before every test.
CREATE TABLE IF NOT EXISTS mtr.vigil_baseline_users (
  user VARCHAR(128) NOT NULL, host VARCHAR(255) NOT NULL, PRIMARY KEY (user, host)
) ENGINE=MyISAM;
CREATE TABLE IF NOT EXISTS mtr.vigil_baseline_globals (
  name VARCHAR(64) NOT NULL PRIMARY KEY, value LONGTEXT
) ENGINE=MyISAM;
DELETE FROM mtr.vigil_baseline_users;
INSERT INTO mtr.vigil_baseline_users SELECT user, host FROM mysql.global_priv;
DELETE FROM mtr.vigil_baseline_globals;
-- GTID positions and the clock move by themselves.
INSERT INTO mtr.vigil_baseline_globals
  SELECT variable_name, variable_value FROM information_schema.global_variables
  WHERE variable_name NOT LIKE 'GTID\_%' AND variable_name <> 'TIMESTAMP';
