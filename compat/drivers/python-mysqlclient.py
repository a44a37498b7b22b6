#!/usr/bin/python3
"""mysqlclient (Debian python3-mysqldb, on libmariadb): the compatibility
scenario.

mysqlclient binds parameters on the client only; ping(True) turns on
libmariadb's automatic reconnect; change_user is mysql_change_user.
Run: VIGIL_COMPAT_PORT=... /usr/bin/python3 compat/drivers/python-mysqlclient.py
"""
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the repository

import MySQLdb  # noqa: E402

import compat_dbapi as c  # noqa: E402


def connect(db=c.DB, user=c.USER, password=c.PASSWORD):
    return MySQLdb.connect(host=c.HOST, port=c.PORT, user=user, password=password, database=db,
                           charset="utf8mb4", autocommit=True, local_infile=1, binary_prefix=True,
                           connect_timeout=10, read_timeout=30, write_timeout=30)


def driver_reconnect(conn):
    conn.ping(True)  # libmariadb reconnects here (MYSQL_OPT_RECONNECT)


def change_user(conn, user, password, db):
    conn.change_user(user, password, db)


c.Scenario("mysqlclient", "mysqlclient %s on libmariadb %s" % (
    ".".join(str(x) for x in MySQLdb.version_info[:3]), MySQLdb._mysql.get_client_info()), connect,
    error_code=lambda e: e.args[0], sqlstate=lambda e, conn: conn.sqlstate(),
    change_user=change_user, driver_reconnect=driver_reconnect, info=lambda conn: conn.info()).run()
