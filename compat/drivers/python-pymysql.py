#!/usr/bin/python3
"""PyMySQL (Debian python3-pymysql): the compatibility scenario.

PyMySQL is pure Python: parameters are bound on the client only (no
server-side prepared statements), ping(reconnect=True) reconnects, and it
has no change_user. It does not expose the SQLSTATE of an error.
Run: VIGIL_COMPAT_PORT=... /usr/bin/python3 compat/drivers/python-pymysql.py
"""
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the repository

import pymysql  # noqa: E402

import compat_dbapi as c  # noqa: E402


def connect(db=c.DB, user=c.USER, password=c.PASSWORD):
    return pymysql.connect(host=c.HOST, port=c.PORT, user=user, password=password, database=db,
                           charset="utf8mb4", autocommit=True, local_infile=True,
                           connect_timeout=10, read_timeout=30, write_timeout=30)


def driver_reconnect(conn):
    conn.ping(reconnect=True)


c.Scenario("PyMySQL", "PyMySQL %s" % pymysql.__version__, connect,
           error_code=lambda e: e.args[0], sqlstate=lambda e, conn: None,
           driver_reconnect=driver_reconnect).run()
